package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// openTestCached opens a one-connection writer pool over a new file with
// one table.
func openTestCached(t *testing.T) *sql.DB {
	t.Helper()
	db := openCached("file:"+filepath.Join(t.TempDir(), "t.db")+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(1000)", "BEGIN IMMEDIATE", nil, nil)
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec("CREATE TABLE t (x integer)"); err != nil {
		t.Fatal(err)
	}
	return db
}

func count(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCachedTransactionsCommitAndRollBack(t *testing.T) {
	db := openTestCached(t)
	for i := range 3 {
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec("INSERT INTO t VALUES ($1)", i); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			err = tx.Rollback()
		} else {
			err = tx.Commit()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := count(t, db); n != 2 {
		t.Fatalf("%d rows after two commits and a rollback, want 2", n)
	}
}

// A writer's transaction takes the write lock when it begins, so that two
// writers never deadlock upgrading read locks.
func TestCachedWriterBeginsImmediate(t *testing.T) {
	db := openTestCached(t)
	path := ""
	if err := db.QueryRow("SELECT file FROM pragma_database_list WHERE name = 'main'").Scan(&path); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	other := openCached("file:"+path+"?_pragma=busy_timeout(0)", "BEGIN IMMEDIATE", nil, nil)
	defer other.Close()
	if _, err := other.Begin(); err == nil {
		t.Fatal("a second writer began while the first held its transaction; want the database locked")
	}
}

func TestCachedBeginWithEndedContextLeavesConnectionClean(t *testing.T) {
	db := openTestCached(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := db.BeginTx(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("BeginTx with an ended context: %v, want context.Canceled", err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatalf("the connection is unusable after a begin that failed: %v", err)
	}
	if _, err := tx.Exec("INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
}

// The commit counter counts each transaction committed, explicit or a
// single statement's, and neither a rollback nor a read.
func TestCachedCountsCommits(t *testing.T) {
	var commits atomic.Int64
	db := openCached("file:"+filepath.Join(t.TempDir(), "t.db")+"?_pragma=journal_mode(WAL)", "BEGIN IMMEDIATE", &commits, nil)
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec("CREATE TABLE t (x integer)"); err != nil {
		t.Fatal(err)
	}
	start := commits.Load()
	for i := range 3 {
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec("INSERT INTO t VALUES ($1)", i); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			err = tx.Rollback()
		} else {
			err = tx.Commit()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec("INSERT INTO t VALUES (9)"); err != nil {
		t.Fatal(err)
	}
	count(t, db)
	if got := commits.Load() - start; got != 3 {
		t.Fatalf("%d commits counted for two committed transactions, a rollback, one statement and a read; want 3", got)
	}
}

func TestLimitParams(t *testing.T) {
	for _, c := range []struct {
		query string
		want  []int
	}{
		{"SELECT x FROM t", nil},
		{"SELECT x FROM t LIMIT 1", nil},
		{"SELECT x FROM t WHERE x > ? LIMIT ?", []int{2}},
		{"SELECT x FROM t WHERE x > ?2 ORDER BY x limit ?1", []int{1}},
		{"SELECT x FROM t WHERE x = ?3 LIMIT ?", []int{4}},
		{"SELECT x FROM t WHERE x = $1 OR x = $2 LIMIT $1", []int{1}},
		{"SELECT x FROM t WHERE x >= $2 ORDER BY x LIMIT $1", []int{1}},
		{"SELECT x FROM t WHERE y IN ($1, $2, $3, $6) AND x < $4 ORDER BY x LIMIT $5", []int{5}},
		{"SELECT x FROM t WHERE x = $a LIMIT $b", []int{2}},
		{"SELECT x FROM t WHERE x = $ LIMIT ?", []int{1}},
		{"SELECT x FROM t WHERE x = @a LIMIT @n OFFSET @o", []int{2}},
		{"SELECT x FROM t WHERE y = 'LIMIT ?' AND x = ? LIMIT ?", []int{2}},
		{"-- LIMIT ?\nSELECT x FROM t /* LIMIT ? */ WHERE x = ? LIMIT\n  ?", []int{2}},
		{"UPDATE t SET x = x + 1 WHERE rowid IN (SELECT rowid FROM t WHERE x = ?1 LIMIT ?2) RETURNING x", []int{2}},
		{"SELECT json_extract(x, '$.limit') FROM t LIMIT ?", []int{1}},
		{"SELECT x FROM t WHERE x = 'unclosed LIMIT ?", nil},
	} {
		got := limitParams(c.query)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("limitParams(%q) = %v, want %v", c.query, got, c.want)
		}
	}
}

// A statement with a bound LIMIT is cached once per value, so that
// alternating values do not make SQLite prepare it again on every run,
// and each value returns its own rows.
func TestCachedStatementPerLimitValue(t *testing.T) {
	db := openTestCached(t)
	for i := range 5 {
		if _, err := db.Exec("INSERT INTO t VALUES (?)", i); err != nil {
			t.Fatal(err)
		}
	}
	const q = "SELECT x FROM t WHERE x >= ? ORDER BY x LIMIT ?"
	for i := range 6 {
		limit := 1 + i%2
		rows, err := db.Query(q, 0, limit)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for rows.Next() {
			n++
		}
		rows.Close()
		if n != limit {
			t.Fatalf("LIMIT %d returned %d rows", limit, n)
		}
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var keys []string
	if err := conn.Raw(func(dc any) error {
		for k, cs := range dc.(*cachingConn).queries[q].byLimit {
			if cs.stmt != nil {
				keys = append(keys, strings.ReplaceAll(k, "\x00", " "))
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	if fmt.Sprint(keys) != "[1  2 ]" {
		t.Fatalf("statements cached for the query under %q, want one per LIMIT value (1 and 2)", keys)
	}
}

// BenchmarkAlternatingLimit runs one query with two LIMIT values in turn,
// as River's fetches of three queues do.
func BenchmarkAlternatingLimit(b *testing.B) {
	db := openCached("file:"+filepath.Join(b.TempDir(), "t.db")+"?_pragma=journal_mode(WAL)", "BEGIN IMMEDIATE", nil, nil)
	db.SetMaxOpenConns(1)
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE t (x integer, q text)"); err != nil {
		b.Fatal(err)
	}
	const q = "UPDATE t SET x = x + 1 WHERE rowid IN (SELECT rowid FROM t WHERE q = ? AND x >= 0 ORDER BY x LIMIT ?) RETURNING x, json_array(q, x), coalesce(q, 'none')"
	for i := 0; b.Loop(); i++ {
		rows, err := db.Query(q, "dispatch", 1+i%2)
		if err != nil {
			b.Fatal(err)
		}
		for rows.Next() {
		}
		rows.Close()
	}
}

// A LIMIT a caller chooses cannot crowd the ledger's own statements out of
// the cache: however many values are bound, each query keeps at most
// maxLimitVariants statements, all of them together at most
// maxVariantStatements, and a statement without a LIMIT is still cached
// afterwards.
func TestCallerChosenLimitsStayBounded(t *testing.T) {
	db := openTestCached(t)
	for q := range 8 {
		query := fmt.Sprintf("SELECT x FROM t WHERE x > %d ORDER BY x LIMIT ?", q)
		for limit := 1; limit <= 500; limit++ {
			rows, err := db.Query(query, limit)
			if err != nil {
				t.Fatal(err)
			}
			rows.Close()
		}
	}
	if _, err := db.Exec("INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Raw(func(dc any) error {
		c := dc.(*cachingConn)
		variants := 0
		for text, q := range c.queries {
			if len(q.byLimit) > maxLimitVariants {
				t.Errorf("%d statements cached for %q, want at most %d", len(q.byLimit), text, maxLimitVariants)
			}
			variants += len(q.byLimit)
		}
		if variants > maxVariantStatements {
			t.Errorf("%d statements cached for LIMIT values, want at most %d", variants, maxVariantStatements)
		}
		if q := c.queries["INSERT INTO t VALUES (1)"]; q == nil || q.plain.stmt == nil {
			t.Errorf("a statement without a LIMIT was not cached after the callers' LIMITs (%d queries cached)", len(c.queries))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
