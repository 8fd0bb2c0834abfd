// Package sqlite is the embedded ledger store: one SQLite file (pure Go,
// modernc.org/sqlite) in WAL mode, holding taskgate's tables and River's.
// Commits are durable by default (synchronous=full); Options.Synchronous
// "normal" trades the last commits on power loss for speed. It is the zero-setup default for a single gateway
// process.
//
// SQLite allows one writer at a time, so every write (taskgate's and
// River's) goes through one connection, as River advises for SQLite;
// concurrent acceptances are committed in groups on it. Reads use a separate
// pool on the same WAL file and never wait for writers.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	sqlite3 "modernc.org/sqlite"
	sqlite3lib "modernc.org/sqlite/lib"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/internal/sqlstore"
	"github.com/taskgate/taskgate/secrets"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Options configure Open. The zero value is durable and quiet.
type Options struct {
	Logger *slog.Logger
	Clock  func() time.Time
	// Synchronous is SQLite's synchronous setting: "full" (the default:
	// a commit survives power loss) or "normal" (faster; the last commits
	// may be lost on power loss, never corrupted).
	Synchronous string
	// Secrets seals secret argument values; see sqlstore.Options.
	Secrets *secrets.Ring
	// MaxAcceptBatch caps group commits; see sqlstore.Options.
	MaxAcceptBatch int
	// ReadConns is the size of the read pool; zero means 4.
	ReadConns int
	// VacuumEvery is how often pages that deleted rows freed are given
	// back to the file system (an incremental vacuum); zero means
	// [DefaultVacuumEvery].
	VacuumEvery time.Duration
}

// DefaultVacuumEvery is how often a ledger gives freed pages back.
const DefaultVacuumEvery = 10 * time.Minute

// vacuumPages bounds one incremental vacuum, so that it holds the write
// lock briefly: 2,000 pages are 8 MB at SQLite's default page size.
const vacuumPages = 2000

// Store is the SQLite ledger.
type Store struct {
	*sqlstore.Store
	drv *driver
}

var _ ledger.Store = (*Store)(nil)

// Open opens the ledger file at path, creating it if needed. It does not
// migrate; call Migrate.
func Open(ctx context.Context, path string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	sync := strings.ToLower(cmpOr(o.Synchronous, "full"))
	if sync != "full" && sync != "normal" {
		return nil, fmt.Errorf("sqlite synchronous must be \"full\" or \"normal\", got %q", o.Synchronous)
	}
	if path == "" {
		return nil, errors.New("sqlite ledger path is empty; try sqlite:./taskgate.db")
	}
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("sqlite ledger path %q may not contain '?' or '#'", path)
	}
	if dir := filepath.Dir(path); dir != "" {
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("sqlite ledger directory %s: %w", dir, err)
		}
	}
	// A new ledger can give the space of deleted rows back
	// (auto_vacuum must be chosen before the first table is created; on a
	// ledger created before, the pragma changes nothing, and a backup,
	// which turns it on, restored in its place converts it).
	// Temporary tables and indices SQLite builds for a statement stay in
	// memory. secure_delete zeroes the space a changed or deleted row
	// frees, so that an erased secret argument's sealed value does not
	// linger in the file's free space.
	pragmas := "_pragma=busy_timeout(10000)&_pragma=auto_vacuum(incremental)&_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_pragma=temp_store(memory)&_pragma=secure_delete(1)&_pragma=synchronous(" + sync + ")"
	commits, committed := new(atomic.Int64), new(commitSignal)
	w := openCached("file:"+path+"?"+pragmas, "BEGIN IMMEDIATE", commits, committed)
	w.SetMaxOpenConns(1)
	w.SetConnMaxIdleTime(0)
	if err := checkDatabase(ctx, w, path); err != nil {
		w.Close()
		return nil, err
	}
	r := openCached("file:"+path+"?_pragma=busy_timeout(10000)&_pragma=query_only(1)", "BEGIN", nil, nil)
	r.SetMaxOpenConns(cmpOr(o.ReadConns, 4))
	inserter, err := river.NewClient(insertDriver{riversqlite.New(w)}, &river.Config{Logger: o.Logger})
	if err != nil {
		w.Close()
		r.Close()
		return nil, fmt.Errorf("create job inserter: %w", err)
	}
	d := &driver{write: w, read: r, path: path, inserter: inserter, log: o.Logger, commits: commits, committed: committed}
	fsys, err := fs.Sub(migrations, "migrations")
	if err == nil {
		d.version, err = sqlstore.LatestVersion(fsys)
	}
	if err != nil {
		w.Close()
		r.Close()
		return nil, err
	}
	d.migrations = fsys
	d.vacuumStop, d.vacuumDone = make(chan struct{}), make(chan struct{})
	go d.vacuum(cmpOr(o.VacuumEvery, DefaultVacuumEvery))
	return &Store{
		Store: sqlstore.New(d, &sqlstore.Options{Logger: o.Logger, Clock: o.Clock, MaxAcceptBatch: o.MaxAcceptBatch, Secrets: o.Secrets}),
		drv:   d,
	}, nil
}

// checkDatabase fails early, with a sentence, on a file that is not SQLite.
func checkDatabase(ctx context.Context, db *sql.DB, path string) error {
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		var se *sqlite3.Error
		if errors.As(err, &se) && (se.Code() == sqlite3lib.SQLITE_NOTADB || se.Code() == sqlite3lib.SQLITE_CORRUPT) {
			return fmt.Errorf("%s is not a SQLite database or is corrupt (%v); point --db at a taskgate ledger or a new file", path, err)
		}
		return fmt.Errorf("open sqlite ledger %s: %w", path, err)
	}
	if mode != "wal" {
		return fmt.Errorf("sqlite ledger %s could not switch to WAL mode (journal_mode is %q)", path, mode)
	}
	return nil
}

// DB returns the write connection pool (one connection), on which River's
// worker client must run so that its writes and taskgate's serialise.
func (s *Store) DB() *sql.DB { return s.drv.write }

// Commits is the number of write transactions committed on the ledger
// since it was opened: taskgate's, River's, migrations and vacuums. Each
// is one sync of the write-ahead log to disk (synchronous FULL).
func (s *Store) Commits() int64 { return s.drv.commits.Load() }

// NewJobClient returns a River client over this store's database. Its
// notifications are read when this store commits (see listener).
func (s *Store) NewJobClient(config *river.Config) (ledger.JobClient, error) {
	return river.NewClient(jobDriver{Driver: riversqlite.New(s.drv.write), read: s.drv.read, commits: s.drv.committed}, config)
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

type driver struct {
	write, read *sql.DB
	// commits counts the transactions committed on the write connection;
	// committed is told of each, for the job client's listener.
	commits    *atomic.Int64
	committed  *commitSignal
	path       string
	inserter   *river.Client[*sql.Tx]
	log        *slog.Logger
	migrations fs.FS
	version    int64
	// vacuumStop ends the incremental vacuum's loop; vacuumDone is
	// closed when it has.
	vacuumStop, vacuumDone chan struct{}
}

// vacuum gives freed pages back every interval until Close. A ledger whose
// auto_vacuum is not incremental answers the pragma by doing nothing.
func (d *driver) vacuum(every time.Duration) {
	defer close(d.vacuumDone)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-d.vacuumStop:
			return
		case <-t.C:
		}
		if _, err := d.write.Exec(fmt.Sprintf("PRAGMA incremental_vacuum(%d)", vacuumPages)); err != nil {
			d.log.Warn("the incremental vacuum of the ledger failed; it is tried again later", "path", d.path, "error", err)
		}
	}
}

func (d *driver) Name() string           { return "sqlite" }
func (d *driver) SchemaVersion() int64   { return d.version }
func (d *driver) ForUpdate() string      { return "" }
func (d *driver) ForNoKeyUpdate() string { return "" }
func (d *driver) AcceptWorkers() int     { return 1 }

func (d *driver) Begin(ctx context.Context) (sqlstore.Tx, error) {
	tx, err := d.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return &txConn{querier: querier{tx}, tx: tx, inserter: d.inserter}, nil
}

func (d *driver) Reader() sqlstore.Querier { return querier{d.read} }

func (d *driver) Migrate(ctx context.Context) error {
	p, err := sqlstore.NewMigrations(goose.DialectSQLite3, d.write, d.migrations)
	if err != nil {
		return fmt.Errorf("prepare ledger migrations: %w", err)
	}
	if err := sqlstore.MigrateLedger(ctx, p, d.version, d.path); err != nil {
		return err
	}
	m, err := rivermigrate.New(riversqlite.New(d.write), &rivermigrate.Config{Logger: d.log})
	if err != nil {
		return fmt.Errorf("prepare job queue migrations: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate job queue tables in %s: %w", d.path, err)
	}
	return nil
}

func (d *driver) Retryable(err error) bool {
	var se *sqlite3.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3lib.SQLITE_BUSY, sqlite3lib.SQLITE_LOCKED:
			return true
		}
	}
	return false
}

func (d *driver) Interpret(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: %w", ledger.ErrNotFound, err)
	}
	return err
}

func (d *driver) Close() error {
	close(d.vacuumStop)
	<-d.vacuumDone
	return errors.Join(d.read.Close(), d.write.Close())
}
