package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riversqlite"

	"github.com/taskgate/taskgate/internal/testwait"
)

// listenerStore opens a migrated ledger and a listener on it that reads
// without a gap and, unless woken, every idleEvery.
func listenerStore(t *testing.T, ctx context.Context, idleEvery time.Duration) (*Store, *listener) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.db")
	s, err := Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	d := jobDriver{Driver: riversqlite.New(s.drv.write), read: s.drv.read, commits: s.drv.committed}
	l := d.GetListener(&riverdriver.GetListenenerParams{}).(*listener)
	l.minGap, l.idleEvery = 0, idleEvery
	if err := l.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return s, l
}

// notify writes one notification as River does on SQLite: a row of its
// table, in a transaction on db.
func notify(t *testing.T, ctx context.Context, db *sql.DB, topic, payload string) {
	t.Helper()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO river_notification (topic, payload) VALUES (?, ?)`, topic, payload); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// waitNotification runs WaitForNotification in the background.
func waitNotification(ctx context.Context, l *listener) <-chan *riverdriver.Notification {
	got := make(chan *riverdriver.Notification, 1)
	go func() {
		n, _ := l.WaitForNotification(ctx)
		got <- n
	}()
	return got
}

// A notification committed on the ledger is delivered at once, though the
// listener would otherwise not read the table for an hour: the commit
// wakes it. Before, River's listener read the table every 50ms.
func TestListenerIsWokenByTheLedgersCommits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, l := listenerStore(t, ctx, time.Hour)
	if err := l.Listen(ctx, "river_insert"); err != nil {
		t.Fatal(err)
	}
	got := waitNotification(ctx, l)
	// The listener reads once when it starts; only then would it sleep.
	testwait.Until(t, ctx, "the listener's first read", func() (bool, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		return !l.lastRead.IsZero(), nil
	})
	notify(t, ctx, s.DB(), "river_insert", `{"queue":"dispatch"}`)
	select {
	case n := <-got:
		if n == nil || n.Topic != "river_insert" || n.Payload != `{"queue":"dispatch"}` {
			t.Fatalf("delivered %+v, want the committed notification", n)
		}
	case <-ctx.Done():
		t.Fatal("the committed notification was not delivered: the commit did not wake the listener")
	}
}

// Only topics subscribed to are delivered, only what was written after
// the subscription, in the order written, and nothing of a topic after
// Unlisten.
func TestListenerDeliversSubscribedTopicsInOrder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, l := listenerStore(t, ctx, time.Hour)
	notify(t, ctx, s.DB(), "river_insert", "before")
	if err := l.Listen(ctx, "river_insert"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []struct{ topic, payload string }{
		{"river_leadership", "not subscribed"}, {"river_insert", "one"}, {"river_insert", "two"},
	} {
		notify(t, ctx, s.DB(), n.topic, n.payload)
	}
	for _, want := range []string{"one", "two"} {
		n, err := l.WaitForNotification(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n.Topic != "river_insert" || n.Payload != want {
			t.Fatalf("delivered %s %q, want river_insert %q", n.Topic, n.Payload, want)
		}
	}
	if err := l.Unlisten(ctx, "river_insert"); err != nil {
		t.Fatal(err)
	}
	notify(t, ctx, s.DB(), "river_insert", "after unlisten")
	if err := l.Listen(ctx, "river_leadership"); err != nil {
		t.Fatal(err)
	}
	notify(t, ctx, s.DB(), "river_leadership", "resigned")
	n, err := l.WaitForNotification(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n.Topic != "river_leadership" {
		t.Fatalf("delivered %s %q after Unlisten, want only river_leadership", n.Topic, n.Payload)
	}
}

// What another process commits to the same file (a taskgate command) is
// delivered by the idle reads, with nothing in this process to wake the
// listener.
func TestListenerSeesOtherProcessesWrites(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, l := listenerStore(t, ctx, 20*time.Millisecond)
	if err := l.Listen(ctx, "river_insert"); err != nil {
		t.Fatal(err)
	}
	other, err := sql.Open("sqlite", "file:"+s.drv.path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	got := waitNotification(ctx, l)
	notify(t, ctx, other, "river_insert", "from another process")
	select {
	case n := <-got:
		if n == nil || n.Payload != "from another process" {
			t.Fatalf("delivered %+v, want the other connection's notification", n)
		}
	case <-ctx.Done():
		t.Fatal("the other connection's notification was not delivered")
	}
}

func TestReadAt(t *testing.T) {
	last := time.Date(2026, 12, 4, 6, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name      string
		committed bool
		want      time.Duration
	}{
		{"nothing committed: the idle read", false, time.Second},
		{"a commit: the least gap after the last read", true, 50 * time.Millisecond},
	} {
		if got := readAt(last, c.committed, 50*time.Millisecond, time.Second).Sub(last); got != c.want {
			t.Errorf("%s: read %s after the last, want %s", c.name, got, c.want)
		}
	}
	if got := readAt(time.Time{}, false, 50*time.Millisecond, time.Second); !got.Before(last) {
		t.Errorf("a listener that never read reads at %s, want at once", got)
	}
}

// A commit signal the listener has taken is not lost when River
// interrupts the wait (it does every few seconds, and on every Listen):
// the next wait reads the table without another commit.
func TestListenerKeepsACommitAcrossAnInterruptedWait(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, l := listenerStore(t, ctx, time.Hour)
	l.minGap = 200 * time.Millisecond
	if err := l.Listen(ctx, "river_insert"); err != nil {
		t.Fatal(err)
	}
	first, interrupt := context.WithCancel(ctx)
	got := waitNotification(first, l)
	testwait.Until(t, ctx, "the listener's first read", func() (bool, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		return !l.lastRead.IsZero(), nil
	})
	notify(t, ctx, s.DB(), "river_insert", "kept")
	testwait.Until(t, ctx, "the listener to take the commit signal", func() (bool, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.committed, nil
	})
	interrupt()
	if n := <-got; n != nil {
		// The read came before the interruption: nothing to keep.
		t.Skipf("delivered %q before the wait was interrupted", n.Payload)
	}
	n, err := l.WaitForNotification(ctx)
	if err != nil {
		t.Fatalf("after an interrupted wait: %v (the commit signal was lost)", err)
	}
	if n.Payload != "kept" {
		t.Fatalf("delivered %q, want the committed notification", n.Payload)
	}
}
