package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/secrets"
)

// Options configure a Store. The zero value is usable.
type Options struct {
	Logger *slog.Logger
	// Clock returns the current time; nil means time.Now.
	Clock func() time.Time
	// MaxAcceptBatch caps how many acceptances commit in one transaction
	// (group commit). Zero means 256; one disables batching.
	MaxAcceptBatch int
	// Secrets, when set, seals the values of secret arguments before an
	// acceptance writes them, and reseals them in SecretsReseal. Without
	// it they are written in plain text (secrets.store: plaintext).
	Secrets *secrets.Ring
}

// Store implements ledger.Store over a Driver, all but NewJobClient, which
// needs the database's own transaction type and lives in the store packages.
type Store struct {
	drv   Driver
	log   *slog.Logger
	clock func() time.Time
	batch int
	ring  *secrets.Ring

	// Group commit: acceptances wait in pending until a leader takes them
	// into one transaction. A caller that finds fewer than maxLeaders
	// leaders leads itself; see group.
	mu         sync.Mutex
	pending    []*acceptRequest
	leaders    int
	maxLeaders int
	closing    bool

	closeOnce sync.Once
	closed    chan struct{}
	wg        sync.WaitGroup // leaders

	// writeLine, where the database serialises writers, lines up every
	// write but the acceptances' groups, one at a time and in order,
	// before the write connection. The connection pool hands a freed
	// connection to a random waiter: without the line, an acceptance a
	// client waits for drew against every worker write queued at once,
	// and a tenant with a backlog of operations holds most of those.
	// With it, an acceptance waits for at most the write in progress and
	// the next in line. Nil where writers run side by side.
	writeLine *semaphore.Weighted
}

// New returns a Store over drv.
func New(drv Driver, opts *Options) *Store {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.MaxAcceptBatch <= 0 {
		o.MaxAcceptBatch = 256
	}
	var line *semaphore.Weighted
	if drv.ForUpdate() == "" {
		line = semaphore.NewWeighted(1)
	}
	return &Store{
		writeLine:  line,
		drv:        drv,
		log:        o.Logger,
		clock:      o.Clock,
		batch:      o.MaxAcceptBatch,
		ring:       o.Secrets,
		maxLeaders: max(1, drv.AcceptWorkers()),
		closed:     make(chan struct{}),
	}
}

// Driver returns the database underneath, for packages that enqueue work
// through the same connections.
func (s *Store) Driver() Driver { return s.drv }

// Dialect names the database.
func (s *Store) Dialect() string { return s.drv.Name() }

// Migrate applies pending migrations.
func (s *Store) Migrate(ctx context.Context) error { return s.drv.Migrate(ctx) }

// Close refuses new acceptances, waits for the groups being committed and
// closes the database.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		s.mu.Unlock()
		close(s.closed)
		s.wg.Wait()
		err = s.drv.Close()
	})
	return err
}

// now is the store's clock at the precision both databases keep.
func (s *Store) now(t time.Time) time.Time {
	if t.IsZero() {
		t = s.clock()
	}
	return t.UTC().Truncate(time.Microsecond)
}

// InTx runs fn in one write transaction, retrying when the database says
// the whole transaction may simply run again. Where the database takes one
// writer at a time, it waits in line behind the other writes (see
// writeLine); acceptances commit with inTx, past the line.
func (s *Store) InTx(ctx context.Context, fn func(tx Tx) error) error {
	if s.writeLine != nil {
		if err := s.writeLine.Acquire(ctx, 1); err != nil {
			return fmt.Errorf("wait in line for the ledger's write connection: %w", err)
		}
		defer s.writeLine.Release(1)
	}
	return s.inTx(ctx, fn)
}

// inTx is InTx without the line.
func (s *Store) inTx(ctx context.Context, fn func(tx Tx) error) error {
	for attempt := 1; ; attempt++ {
		err := s.inTxOnce(ctx, fn)
		if err == nil || attempt >= 5 || !s.drv.Retryable(err) || ctx.Err() != nil {
			return s.drv.Interpret(err)
		}
		s.log.DebugContext(ctx, "retrying ledger transaction", "attempt", attempt, "err", err)
	}
}

func (s *Store) inTxOnce(ctx context.Context, fn func(tx Tx) error) (err error) {
	select {
	case <-s.closed:
		return ledger.ErrClosed
	default:
	}
	tx, err := s.drv.Begin(ctx)
	if err != nil {
		return err
	}
	committed := false
	defer func() {
		// Whatever ended the transaction short of a commit (an error, a
		// cancelled ctx, a panic) must not leave it open: on SQLite it
		// would hold the only write connection.
		if !committed {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = tx.Rollback(rctx)
		}
	}()
	if err = fn(tx); err != nil {
		return err
	}
	if err = tx.Commit(ctx); err != nil {
		return err
	}
	committed = true
	return nil
}

// event appends one event inside tx and returns its hash. An event of an
// operation is the next link of the operation's chain: head must be the
// operation's chain head as read in tx under the operation's row lock
// (the lock is what keeps two transactions from both appending after one
// head), and the returned hash is the new head, for the next event of the
// same transaction. The database moves the head as the event is inserted
// and refuses an event that does not follow it (migration 00010). An
// event of no operation (opRef 0, a denial that named none) belongs to no
// chain and is stored without a hash: no operation row could hold its
// head, and it records a refusal that accepted, reserved and started
// nothing.
func (s *Store) event(ctx context.Context, tx Querier, opRef int64, head string, attemptRef int64, kind ledger.EventKind, data any, at time.Time) (string, error) {
	raw := []byte("{}")
	if data != nil {
		var err error
		if raw, err = json.Marshal(data); err != nil {
			return "", fmt.Errorf("encode %s event: %w", kind, err)
		}
	}
	var hash, prev any
	if opRef != 0 {
		e := &ledger.Event{OperationRef: opRef, AttemptRef: attemptRef, Kind: kind, Data: raw, CreatedAt: at, PrevHash: head}
		h, err := ledger.EventHash(e)
		if err != nil {
			return "", fmt.Errorf("chain the %s event of operation %d: %w", kind, opRef, err)
		}
		hash, prev = h, head
	}
	if _, err := tx.Exec(ctx, `INSERT INTO events (operation_ref, attempt_ref, kind, data, created_at, hash, prev_hash) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		idOrNull(opRef), idOrNull(attemptRef), kind, string(raw), at, hash, prev); err != nil {
		return "", fmt.Errorf("record the %s event of operation %d: %w", kind, opRef, err)
	}
	h, _ := hash.(string)
	return h, nil
}

// chainHead reads an operation's chain head inside tx and locks the
// operation's row until tx ends, so that the events tx appends after it
// follow it.
func (s *Store) chainHead(ctx context.Context, tx Querier, opRef int64) (string, error) {
	var head string
	if err := tx.QueryRow(ctx, `SELECT chain_head FROM operations WHERE id = $1`+s.drv.ForNoKeyUpdate(), opRef).Scan(&head); err != nil {
		return "", s.notFound(err, fmt.Sprintf("operation %d", opRef))
	}
	return head, nil
}

// notFound turns a missing row into ledger.ErrNotFound with what was sought.
func (s *Store) notFound(err error, what string) error {
	err = s.drv.Interpret(err)
	if errors.Is(err, ledger.ErrNotFound) {
		return fmt.Errorf("%s: %w", what, ledger.ErrNotFound)
	}
	return err
}
