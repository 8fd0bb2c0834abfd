package sqlite

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"sync/atomic"

	sqlite3 "modernc.org/sqlite"
)

// maxCachedStatements bounds the prepared statements kept per connection.
const maxCachedStatements = 256

// openCached opens a database/sql pool whose connections prepare each
// distinct statement once and reuse it. modernc's driver parses every
// query anew, and parsing was the largest CPU cost of an acceptance (its
// own statements and River's); the ledger issues the same few statements
// over and over. Transactions that are not read-only begin with begin
// ("BEGIN IMMEDIATE" for a writer, so that it takes the write lock first
// and never fails to upgrade).
// When commits is not nil, every transaction committed on the pool's
// connections (explicit or not) adds one to it. When committed is not
// nil, it is told of every explicit transaction once it has committed.
func openCached(dsn, begin string, commits *atomic.Int64, committed *commitSignal) *sql.DB {
	return sql.OpenDB(connector{dsn: dsn, begin: begin, drv: &sqlite3.Driver{}, commits: commits, committed: committed})
}

type connector struct {
	dsn, begin string
	drv        *sqlite3.Driver
	commits    *atomic.Int64
	committed  *commitSignal
}

func (c connector) Connect(context.Context) (sqldriver.Conn, error) {
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	if c.commits != nil {
		conn.(sqlite3.HookRegisterer).RegisterCommitHook(func() int32 {
			c.commits.Add(1)
			return 0 // 0: the commit goes ahead
		})
	}
	return &cachingConn{Conn: conn, begin: c.begin, committed: c.committed, stmts: map[string]*cachedStmt{}}, nil
}

func (c connector) Driver() sqldriver.Driver { return c.drv }

// cachingConn is one modernc connection with a statement cache. database/sql
// uses a connection from one goroutine at a time, so the cache needs no lock.
type cachingConn struct {
	sqldriver.Conn
	begin     string
	committed *commitSignal
	stmts     map[string]*cachedStmt
}

type cachedStmt struct {
	stmt sqldriver.Stmt
	busy bool // its rows are still open
}

var (
	_ sqldriver.ExecerContext      = (*cachingConn)(nil)
	_ sqldriver.QueryerContext     = (*cachingConn)(nil)
	_ sqldriver.ConnBeginTx        = (*cachingConn)(nil)
	_ sqldriver.ConnPrepareContext = (*cachingConn)(nil)
	_ sqldriver.SessionResetter    = (*cachingConn)(nil)
	_ sqldriver.Validator          = (*cachingConn)(nil)
	_ sqldriver.Pinger             = (*cachingConn)(nil)
	_ sqlite3.HookRegisterer       = (*cachingConn)(nil)
)

// statement returns a prepared statement for query and the function that
// gives it back. A statement whose rows are still open is not shared: a
// second use gets a fresh statement of its own.
func (c *cachingConn) statement(ctx context.Context, query string) (sqldriver.Stmt, func(), error) {
	if cs, ok := c.stmts[query]; ok && !cs.busy {
		cs.busy = true
		return cs.stmt, func() { cs.busy = false }, nil
	}
	s, err := c.Conn.(sqldriver.ConnPrepareContext).PrepareContext(ctx, query)
	if err != nil {
		return nil, nil, err
	}
	if _, ok := c.stmts[query]; ok || len(c.stmts) >= maxCachedStatements {
		return s, func() { _ = s.Close() }, nil
	}
	cs := &cachedStmt{stmt: s, busy: true}
	c.stmts[query] = cs
	return s, func() { cs.busy = false }, nil
}

func (c *cachingConn) ExecContext(ctx context.Context, query string, args []sqldriver.NamedValue) (sqldriver.Result, error) {
	s, release, err := c.statement(ctx, query)
	if err != nil {
		return nil, err
	}
	defer release()
	return s.(sqldriver.StmtExecContext).ExecContext(ctx, args)
}

func (c *cachingConn) QueryContext(ctx context.Context, query string, args []sqldriver.NamedValue) (sqldriver.Rows, error) {
	s, release, err := c.statement(ctx, query)
	if err != nil {
		return nil, err
	}
	rows, err := s.(sqldriver.StmtQueryContext).QueryContext(ctx, args)
	if err != nil {
		release()
		return nil, err
	}
	return &releasingRows{Rows: rows, release: release}, nil
}

func (c *cachingConn) PrepareContext(ctx context.Context, query string) (sqldriver.Stmt, error) {
	return c.Conn.(sqldriver.ConnPrepareContext).PrepareContext(ctx, query)
}

// BeginTx runs BEGIN, COMMIT and ROLLBACK as cached statements too: every
// acceptance runs them, and modernc's own transactions prepare each anew.
func (c *cachingConn) BeginTx(ctx context.Context, opts sqldriver.TxOptions) (sqldriver.Tx, error) {
	begin := c.begin
	if opts.ReadOnly {
		begin = "BEGIN"
	}
	if _, err := c.ExecContext(ctx, begin, nil); err != nil {
		// ctx may have ended after BEGIN took effect, which the driver
		// reports as ctx's error: the connection must not stay in a
		// transaction database/sql does not know of. Without one,
		// ROLLBACK fails harmlessly.
		_, _ = c.ExecContext(context.Background(), "ROLLBACK", nil)
		return nil, err
	}
	return cachedTx{c}, nil
}

// cachedTx is a transaction on a cachingConn. Its COMMIT does not watch a
// context: it cannot wait for a lock (the transaction holds the write
// lock, or wrote nothing), and a context that ended as it ran would turn
// a commit that happened into a reported failure.
type cachedTx struct{ c *cachingConn }

func (t cachedTx) Commit() error {
	_, err := t.c.ExecContext(context.Background(), "COMMIT", nil)
	if err != nil {
		// A commit that failed can leave the transaction open, and
		// database/sql hands the connection on as if it were not.
		_, _ = t.c.ExecContext(context.Background(), "ROLLBACK", nil)
		return err
	}
	if t.c.committed != nil {
		t.c.committed.notify()
	}
	return nil
}

func (t cachedTx) Rollback() error {
	_, err := t.c.ExecContext(context.Background(), "ROLLBACK", nil)
	return err
}

func (c *cachingConn) ResetSession(ctx context.Context) error {
	return c.Conn.(sqldriver.SessionResetter).ResetSession(ctx)
}

func (c *cachingConn) IsValid() bool { return c.Conn.(sqldriver.Validator).IsValid() }

func (c *cachingConn) Ping(ctx context.Context) error { return c.Conn.(sqldriver.Pinger).Ping(ctx) }

func (c *cachingConn) RegisterPreUpdateHook(fn sqlite3.PreUpdateHookFn) {
	c.Conn.(sqlite3.HookRegisterer).RegisterPreUpdateHook(fn)
}

func (c *cachingConn) RegisterCommitHook(fn sqlite3.CommitHookFn) {
	c.Conn.(sqlite3.HookRegisterer).RegisterCommitHook(fn)
}

func (c *cachingConn) RegisterRollbackHook(fn sqlite3.RollbackHookFn) {
	c.Conn.(sqlite3.HookRegisterer).RegisterRollbackHook(fn)
}

// Close finalizes the cached statements, then closes the connection.
func (c *cachingConn) Close() error {
	var errs []error
	for q, cs := range c.stmts {
		errs = append(errs, cs.stmt.Close())
		delete(c.stmts, q)
	}
	return errors.Join(append(errs, c.Conn.Close())...)
}

// releasingRows gives its statement back when closed.
type releasingRows struct {
	sqldriver.Rows
	release func()
	done    bool
}

func (r *releasingRows) Close() error {
	err := r.Rows.Close()
	if !r.done {
		r.done = true
		r.release()
	}
	return err
}
