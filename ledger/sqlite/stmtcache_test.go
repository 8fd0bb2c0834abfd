package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
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

