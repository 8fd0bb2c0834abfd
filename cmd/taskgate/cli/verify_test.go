package cli_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/sqlite"
)

// events lists an operation's events, oldest first.
func (l *ledgerFile) events(t *testing.T, op *ledger.Operation) []*ledger.Event {
	t.Helper()
	events, err := l.store.EventList(context.Background(), op.ID)
	if err != nil {
		t.Fatal(err)
	}
	return events
}

// exec changes the ledger's rows directly, as someone with access to the
// database file could.
func (l *ledgerFile) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	if _, err := l.store.(*sqlite.Store).DB().ExecContext(context.Background(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func TestVerifyUntouched(t *testing.T) {
	l := newLedger(t)
	if out := l.ok(t, "verify"); out != "every hash chain in ledger "+l.db+" holds: 0 operations, 0 chained events\n" {
		t.Errorf("verify of an empty ledger printed %q", out)
	}
	l.completed(t, "acme", "op-1")
	l.completed(t, "beta", "op-1")
	quiet := l.accept(t, "acme", "op-quiet", false)
	want := "every hash chain in ledger " + l.db + " holds: 3 operations, 4 chained events\n"
	if out := l.ok(t, "verify"); out != want {
		t.Errorf("verify printed %q, want %q", out, want)
	}
	if out := l.ok(t, "verify", "op-1", "--tenant", "acme"); out != `operation "op-1" of tenant "acme": holds, 2 chained events`+"\n"+
		"every hash chain in ledger "+l.db+" holds: 1 operation, 2 chained events\n" {
		t.Errorf("verify op-1 --tenant acme printed %q", out)
	}
	out := l.ok(t, "verify", "op-1")
	if !strings.Contains(out, `operation "op-1" of tenant "acme": holds`) || !strings.Contains(out, `operation "op-1" of tenant "beta": holds`) ||
		!strings.HasSuffix(out, "holds: 2 operations, 4 chained events\n") {
		t.Errorf("verify op-1 printed %q, want a line for each tenant's op-1 and the summary", out)
	}

	// An operation accepted before the ledger kept chains, with no event
	// since: its chain starts at the migration, which is no break.
	l.exec(t, `UPDATE operations SET chain_head = $1 WHERE id = $2`, ledger.ChainStartMigration, quiet.ID)
	want = "every hash chain in ledger " + l.db + " holds: 3 operations, 4 chained events; the chains of 1 operation start at migration 00010, after 0 events recorded before it\n"
	if out := l.ok(t, "verify"); out != want {
		t.Errorf("verify with a migrated operation printed %q, want %q", out, want)
	}
	if out := l.ok(t, "verify", "op-quiet"); !strings.HasPrefix(out, `operation "op-quiet" of tenant "acme": holds, 0 chained events; the chain starts at migration 00010`) {
		t.Errorf("verify op-quiet printed %q, want it to say its chain starts at the migration", out)
	}
}

func TestVerifyTampered(t *testing.T) {
	tests := []struct {
		name string
		// tamper changes beta/op-1's events (remote_job_bound, then
		// result_stored) and returns the event verify must name.
		tamper func(t *testing.T, l *ledgerFile, ev []*ledger.Event) string
	}{
		{"edited", func(t *testing.T, l *ledgerFile, ev []*ledger.Event) string {
			l.exec(t, `UPDATE events SET data = $1 WHERE id = $2`, `{"remote_job_id":"another-job"}`, ev[0].ID)
			return fmt.Sprintf("event %d (remote_job_bound), edited: its content no longer matches its hash", ev[0].ID)
		}},
		{"deleted", func(t *testing.T, l *ledgerFile, ev []*ledger.Event) string {
			l.exec(t, `DELETE FROM events WHERE id = $1`, ev[0].ID)
			return fmt.Sprintf("event %d (result_stored), missing: the event it follows is not in the ledger", ev[1].ID)
		}},
		{"the last deleted", func(t *testing.T, l *ledgerFile, ev []*ledger.Event) string {
			l.exec(t, `DELETE FROM events WHERE id = $1`, ev[1].ID)
			return fmt.Sprintf("event %d (remote_job_bound), missing: the operation's head names an event after this one", ev[0].ID)
		}},
		{"reordered", func(t *testing.T, l *ledgerFile, ev []*ledger.Event) string {
			l.exec(t, `UPDATE events SET id = -1 WHERE id = $1`, ev[0].ID)
			l.exec(t, `UPDATE events SET id = $1 WHERE id = $2`, ev[0].ID, ev[1].ID)
			l.exec(t, `UPDATE events SET id = $1 WHERE id = -1`, ev[1].ID)
			return fmt.Sprintf("event %d (result_stored), reordered: it follows event %d, which is stored after it", ev[0].ID, ev[1].ID)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLedger(t)
			l.completed(t, "acme", "op-1")
			tampered := l.completed(t, "beta", "op-1")
			l.completed(t, "gamma", "op-2")
			at := tt.tamper(t, l, l.events(t, tampered))

			for _, args := range [][]string{{"verify"}, {"verify", "op-1"}, {"verify", "--tenant", "beta"}} {
				r := l.run(t, args...)
				checkFailure(t, r, `the hash chains of 1 of `, false)
				if want := `operation "op-1" of tenant "beta": ` + at; !strings.Contains(r.stdout, want) {
					t.Errorf("%s printed %q, want a line %q", strings.Join(args, " "), r.stdout, want)
				}
				if strings.Contains(r.stdout, `tenant "acme"`) && !strings.Contains(r.stdout, `tenant "acme": holds`) {
					t.Errorf("%s printed %q: it names acme's untouched operation as broken", strings.Join(args, " "), r.stdout)
				}
				if !strings.Contains(r.stderr, `the first that of operation "op-1" of tenant "beta" (at event `) ||
					!strings.Contains(r.stderr, "keep a copy of it as evidence") {
					t.Errorf("%s: stderr %q, want it to name the first broken operation and what to do", strings.Join(args, " "), r.stderr)
				}
			}
			// The other operations still verify alone.
			l.ok(t, "verify", "op-1", "--tenant", "acme")
			l.ok(t, "verify", "op-2")
		})
	}
}

func TestVerifyUnknownOperation(t *testing.T) {
	l := newLedger(t)
	l.completed(t, "acme", "op-1")
	checkFailure(t, l.run(t, "verify", "op-1", "op-none"), `no operation "op-none" in the ledger`, true)
	checkFailure(t, l.run(t, "verify", "op-1", "--tenant", "beta"), `no operation "op-1" in the ledger for tenant "beta"`, true)
}
