package sqlite

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	sqlite3 "modernc.org/sqlite"
)

// maxCachedStatements bounds the query texts whose statements a
// connection keeps (and, a quarter of it, their statements per LIMIT
// value; see cachedQuery).
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
	return &cachingConn{Conn: conn, begin: c.begin, committed: c.committed, queries: map[string]*cachedQuery{}}, nil
}

func (c connector) Driver() sqldriver.Driver { return c.drv }

// cachingConn is one modernc connection with a statement cache. database/sql
// uses a connection from one goroutine at a time, so the cache needs no lock.
type cachingConn struct {
	sqldriver.Conn
	begin     string
	committed *commitSignal
	// queries holds the statements of at most maxCachedStatements query
	// texts; variants counts those cached per LIMIT value.
	queries  map[string]*cachedQuery
	variants int
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

// statement returns a prepared statement for query, bound to args, and
// the function that gives it back. A statement whose rows are still open
// is not shared: a second use gets a fresh statement of its own.
func (c *cachingConn) statement(ctx context.Context, query string, args []sqldriver.NamedValue) (sqldriver.Stmt, func(), error) {
	cs := c.slot(query, args)
	if cs != nil && cs.stmt != nil && !cs.busy {
		cs.busy = true
		return cs.stmt, func() { cs.busy = false }, nil
	}
	s, err := c.Conn.(sqldriver.ConnPrepareContext).PrepareContext(ctx, query)
	if err != nil {
		return nil, nil, err
	}
	if cs == nil || cs.stmt != nil {
		return s, func() { _ = s.Close() }, nil
	}
	cs.stmt, cs.busy = s, true
	return s, func() { cs.busy = false }, nil
}

// maxLimitVariants bounds the statements cached for one query, one per
// value bound to its LIMIT, and maxVariantStatements all such statements
// of a connection: a LIMIT a caller chooses (a page size) adds at most
// that many statements to the cache.
const (
	maxLimitVariants     = 16
	maxVariantStatements = maxCachedStatements / 4
)

// cachedQuery is what a connection caches for one query text: its
// statement, and for a query with a bound LIMIT one statement per value.
//
// SQLite plans a LIMIT with the value bound to it, and so prepares a
// statement again each time that value differs from the last run's:
// River's fetch of available jobs, whose LIMIT is the number of free
// workers of one of three queues, was prepared anew on nearly every fetch
// (7.5% of a busy gateway's CPU, and a third of an idle one's). Past
// maxLimitVariants or maxVariantStatements, further values share one
// statement, as before.
type cachedQuery struct {
	limits  []int // the ordinals of the parameters bound to a LIMIT
	plain   cachedStmt
	byLimit map[string]*cachedStmt
}

// slot returns where query's statement for args is cached (its stmt nil
// if none is yet), or nil when the cache has no room for query.
func (c *cachingConn) slot(query string, args []sqldriver.NamedValue) *cachedStmt {
	q, ok := c.queries[query]
	if !ok {
		if len(c.queries) >= maxCachedStatements {
			return nil
		}
		q = &cachedQuery{limits: limitParams(query)}
		c.queries[query] = q
	}
	if len(q.limits) == 0 {
		return &q.plain
	}
	key := limitValues(q.limits, args)
	if cs, ok := q.byLimit[key]; ok {
		return cs
	}
	if len(q.byLimit) >= maxLimitVariants || c.variants >= maxVariantStatements {
		return &q.plain
	}
	if q.byLimit == nil {
		q.byLimit = map[string]*cachedStmt{}
	}
	cs := &cachedStmt{}
	q.byLimit[key] = cs
	c.variants++
	return cs
}

// limitValues is the values args binds to the parameters ords, as a key.
func limitValues(ords []int, args []sqldriver.NamedValue) string {
	var b []byte
	for _, o := range ords {
		for _, a := range args {
			if a.Ordinal == o {
				b = fmt.Appendf(b, "%v\x00", a.Value)
			}
		}
	}
	return string(b)
}

// limitParams returns the ordinals of the arguments that query binds to
// a LIMIT, as modernc's driver binds them: ?NNN and $NNN to argument NNN,
// a bare ? to one more than the largest number before it, and a name (:a,
// @a, $a) to the number it was first given. Quoted text and comments are
// skipped. A wrong answer costs only speed: the key chooses among copies
// of one statement, each bound afresh.
func limitParams(query string) []int {
	var (
		ords  []int
		last  int
		names = map[string]int{}
		word  string // the last keyword or identifier before here
	)
	for i := 0; i < len(query); {
		ch := query[i]
		switch {
		case ch == '\'' || ch == '"' || ch == '`':
			end := strings.IndexByte(query[i+1:], ch)
			if end < 0 {
				return ords
			}
			i += end + 2
			word = ""
		case strings.HasPrefix(query[i:], "--"):
			end := strings.IndexByte(query[i:], '\n')
			if end < 0 {
				return ords
			}
			i += end + 1
		case strings.HasPrefix(query[i:], "/*"):
			end := strings.Index(query[i+2:], "*/")
			if end < 0 {
				return ords
			}
			i += end + 4
		case ch == '?' || ch == ':' || ch == '@' || ch == '$':
			j := i + 1
			for j < len(query) && isIdent(query[j]) {
				j++
			}
			var n int
			switch name := query[i+1 : j]; {
			case ch == '?' && name == "":
				n = last + 1
			case ch == '?' || ch == '$' && name != "" && name[0] != '0' && isDigits(name):
				n, _ = strconv.Atoi(name)
			case name == "":
				i, word = j, ""
				continue
			default:
				if seen, ok := names[string(ch)+name]; ok {
					n = seen
				} else {
					n = last + 1
					names[string(ch)+name] = n
				}
			}
			last = max(last, n)
			if strings.EqualFold(word, "limit") {
				ords = append(ords, n)
			}
			i, word = j, ""
		case isIdent(ch):
			j := i
			for j < len(query) && isIdent(query[j]) {
				j++
			}
			i, word = j, query[i:j]
		case ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r':
			i++
		default:
			i, word = i+1, ""
		}
	}
	return ords
}

func isDigits(s string) bool {
	return strings.Trim(s, "0123456789") == ""
}

func isIdent(ch byte) bool {
	return ch == '_' || '0' <= ch && ch <= '9' || 'a' <= ch && ch <= 'z' || 'A' <= ch && ch <= 'Z'
}

func (c *cachingConn) ExecContext(ctx context.Context, query string, args []sqldriver.NamedValue) (sqldriver.Result, error) {
	s, release, err := c.statement(ctx, query, args)
	if err != nil {
		return nil, err
	}
	defer release()
	return s.(sqldriver.StmtExecContext).ExecContext(ctx, args)
}

func (c *cachingConn) QueryContext(ctx context.Context, query string, args []sqldriver.NamedValue) (sqldriver.Rows, error) {
	s, release, err := c.statement(ctx, query, args)
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
	for text, q := range c.queries {
		for _, cs := range q.byLimit {
			if cs.stmt != nil {
				errs = append(errs, cs.stmt.Close())
			}
		}
		if q.plain.stmt != nil {
			errs = append(errs, q.plain.stmt.Close())
		}
		delete(c.queries, text)
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
