// Package postgres is the ledger store on PostgreSQL (pgx v5), for several
// gateway replicas sharing one database. Correctness across replicas comes
// from the database's unique constraints, row locks and transactions, never
// from process memory.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/internal/sqlstore"
	"github.com/taskgate/taskgate/secrets"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Options configure Open.
type Options struct {
	Logger *slog.Logger
	Clock  func() time.Time
	// Secrets seals secret argument values; see sqlstore.Options.
	Secrets *secrets.Ring
	// MaxAcceptBatch caps group commits; see sqlstore.Options.
	MaxAcceptBatch int
	// StatementTimeout bounds each ledger statement in a transaction, and
	// the wait for a connection to run it on, whose context sets no
	// deadline of its own; a read outside a transaction gets ten times as
	// long. Zero means DefaultStatementTimeout, negative means no bound.
	StatementTimeout time.Duration
}

// DefaultStatementTimeout is how long a ledger statement may go unanswered
// before the database counts as unreachable. Ledger statements take
// milliseconds; one that waits seconds is waiting on a database that went
// away or a network that stopped delivering, and its caller (a client
// waiting to hear whether its call was accepted) must hear so instead of
// waiting for TCP to give up, which takes minutes.
const DefaultStatementTimeout = 3 * time.Second

// readTimeoutFactor is how much longer than a write statement a read may
// take before it counts as unanswered: reads are the ledger's long
// statements (listing operations, loading a receipt or a review packet)
// and hold no locks while they wait.
const readTimeoutFactor = 10

// defaultConnectTimeout bounds opening a connection when the URL names no
// connect_timeout.
const defaultConnectTimeout = 5 * time.Second

// cancelWatcher makes a statement whose context ends ask the server to
// cancel it before the connection is dropped a second later: a dropped
// connection alone leaves the server's transaction, and every lock it
// holds, in place until the server notices, which for a lock wait or a
// stalled network can take far longer than the statement's bound.
func cancelWatcher(c *pgconn.PgConn) ctxwatch.Handler {
	return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: time.Second}
}

// Store is the PostgreSQL ledger.
type Store struct {
	*sqlstore.Store
	drv *driver
}

var _ ledger.Store = (*Store)(nil)

// migrationLock is the advisory lock key that serialises migrations when
// several replicas start at once.
const migrationLock = 0x7461736b67617465 // "taskgate"

// Open connects to the database at url (a postgres:// URL; a search_path
// parameter selects a schema). It does not migrate; call Migrate.
func Open(ctx context.Context, url string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case o.StatementTimeout == 0:
		o.StatementTimeout = DefaultStatementTimeout
	case o.StatementTimeout < 0:
		o.StatementTimeout = 0
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres URL is not valid: %w", err)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = defaultConnectTimeout
	}
	cfg.ConnConfig.BuildContextWatcherHandler = cancelWatcher
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("cannot reach postgres at %s:%d (database %q): %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database, err)
	}
	inserter, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: o.Logger})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("create job inserter: %w", err)
	}
	fsys, err := fs.Sub(migrations, "migrations")
	if err != nil {
		pool.Close()
		return nil, err
	}
	version, err := sqlstore.LatestVersion(fsys)
	if err != nil {
		pool.Close()
		return nil, err
	}
	d := &driver{pool: pool, inserter: inserter, log: o.Logger, timeout: o.StatementTimeout, migrations: fsys, version: version,
		where: fmt.Sprintf("at %s:%d (database %q)", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)}
	return &Store{
		Store: sqlstore.New(d, &sqlstore.Options{Logger: o.Logger, Clock: o.Clock, MaxAcceptBatch: o.MaxAcceptBatch, Secrets: o.Secrets}),
		drv:   d,
	}, nil
}

// Pool returns the connection pool.
func (s *Store) Pool() *pgxpool.Pool { return s.drv.pool }

// NewJobClient returns a River client over this store's pool.
func (s *Store) NewJobClient(config *river.Config) (ledger.JobClient, error) {
	return river.NewClient(riverpgxv5.New(s.drv.pool), config)
}

type driver struct {
	pool       *pgxpool.Pool
	inserter   *river.Client[pgx.Tx]
	log        *slog.Logger
	timeout    time.Duration // see Options.StatementTimeout
	migrations fs.FS
	version    int64
	where      string // the database, for messages
}

func (d *driver) Name() string           { return "postgres" }
func (d *driver) SchemaVersion() int64   { return d.version }
func (d *driver) ForUpdate() string      { return " FOR UPDATE" }
func (d *driver) ForNoKeyUpdate() string { return " FOR NO KEY UPDATE" }
func (d *driver) AcceptWorkers() int     { return 4 }

func (d *driver) Begin(ctx context.Context) (sqlstore.Tx, error) {
	bctx, cancel := boundContext(ctx, d.timeout)
	defer cancel()
	tx, err := d.pool.Begin(bctx)
	if err != nil {
		return nil, unanswered(bctx, err)
	}
	return &txConn{querier: querier{r: tx, timeout: d.timeout}, tx: tx, inserter: d.inserter}, nil
}

func (d *driver) Reader() sqlstore.Querier {
	return querier{r: d.pool, timeout: readTimeoutFactor * d.timeout}
}

func (d *driver) Migrate(ctx context.Context) error {
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(migrationLock)); err != nil {
		return fmt.Errorf("migrate: take the migration lock: %w", err)
	}
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", int64(migrationLock))
	}()

	db := stdlib.OpenDBFromPool(d.pool)
	defer db.Close()
	p, err := sqlstore.NewMigrations(goose.DialectPostgres, db, d.migrations)
	if err != nil {
		return fmt.Errorf("prepare ledger migrations: %w", err)
	}
	if err := sqlstore.MigrateLedger(ctx, p, d.version, d.where); err != nil {
		return err
	}
	m, err := rivermigrate.New(riverpgxv5.New(d.pool), &rivermigrate.Config{Logger: d.log})
	if err != nil {
		return fmt.Errorf("prepare job queue migrations: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate job queue tables: %w", err)
	}
	return nil
}

func (d *driver) Retryable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "40001", "40P01": // serialization_failure, deadlock_detected
			return true
		}
	}
	return false
}

func (d *driver) Interpret(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %w", ledger.ErrNotFound, err)
	}
	return err
}

func (d *driver) Close() error {
	d.pool.Close()
	return nil
}

// Backup refuses: a PostgreSQL ledger is copied by the server's own tools,
// which take a consistent snapshot without stopping the gateways.
func (s *Store) Backup(context.Context, string) (*ledger.Backup, error) {
	return nil, fmt.Errorf("%w: back up a PostgreSQL ledger with pg_dump --format=custom and restore it with pg_restore, "+
		"as docs/operations.md describes under \"Back up and restore\"", ledger.ErrBackupUnsupported)
}
