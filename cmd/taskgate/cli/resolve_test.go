package cli_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/worker"
)

// inReview puts an operation of acme in review, as a worker does when a
// lookup could not say whether a lost send started a job.
func (l *ledgerFile) inReview(t *testing.T, operationID string) *ledger.Operation {
	t.Helper()
	op := l.accept(t, "acme", operationID, false)
	reason := ledger.ReasonLookupIndeterminate
	out, err := l.store.Transition(context.Background(), &ledger.TransitionParams{
		OperationRef: op.ID, From: []ledger.State{ledger.StateAccepted}, To: ledger.StateReview, ReviewReason: &reason,
		Events: []ledger.EventParams{{Kind: ledger.EventRequireReview, Data: map[string]string{"reason": reason}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestResolveReview(t *testing.T) {
	for _, tc := range []struct {
		name      string
		flags     []string
		wantState ledger.State
		wantNext  string
		jobKind   string // the River job the resolution must enqueue
	}{
		{"attach", []string{"--attach", "hosted-suite-9912"}, ledger.StateRunning, "the gateway will follow remote job hosted-suite-9912", worker.PollArgs{}.Kind()},
		{"resend", []string{"--resend"}, ledger.StateAccepted, "the gateway will send the call again", worker.DispatchArgs{}.Kind()},
		{"fail", []string{"--fail"}, ledger.StateFailed, "the gateway will not send it again", worker.ReconcileArgs{}.Kind()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger(t)
			op := l.inReview(t, "op-"+tc.name)
			if n := l.jobCount(t, tc.jobKind); n != 0 {
				t.Fatalf("%d %s jobs queued before resolving, want 0", n, tc.jobKind)
			}
			out := l.ok(t, append([]string{"ops", "resolve", op.OperationID, "--note", "checked the provider console"}, tc.flags...)...)
			if want := "operation " + op.OperationID + " (task " + op.TaskID + ") is " + string(tc.wantState) + "\n"; !strings.Contains(out, want) {
				t.Errorf("ops resolve printed\n%s\nwant %q", out, want)
			}
			if !strings.Contains(out, "next: "+tc.wantNext) {
				t.Errorf("ops resolve printed\n%s\nwant next: %s", out, tc.wantNext)
			}
			if got := l.operation(t, op); got.State != tc.wantState {
				t.Errorf("state = %s, want %s", got.State, tc.wantState)
			}
			if n := l.jobCount(t, tc.jobKind); n != 1 {
				t.Errorf("%d %s jobs queued, want 1", n, tc.jobKind)
			}
			checkResolvedEvent(t, l, op, "checked the provider console")
			if tc.name == "attach" {
				jobs, err := l.store.RemoteJobList(context.Background(), op.ID)
				if err != nil {
					t.Fatal(err)
				}
				if len(jobs) != 1 || jobs[0].RemoteJobID != "hosted-suite-9912" || !jobs[0].Intended || jobs[0].Status != ledger.JobRunning {
					t.Errorf("remote jobs = %+v, want hosted-suite-9912 bound, intended and running", jobs)
				}
			}

			// The operation no longer waits for review: a second resolution
			// is refused and changes nothing.
			after := l.operation(t, op)
			checkFailure(t, l.run(t, "ops", "resolve", op.OperationID, "--resend"), "is "+string(tc.wantState)+", not waiting for review", false)
			if got := l.operation(t, op); got.State != after.State || got.UpdatedAt != after.UpdatedAt {
				t.Errorf("a refused resolution changed the operation: %s at %s, was %s at %s", got.State, got.UpdatedAt, after.State, after.UpdatedAt)
			}
		})
	}
}

func checkResolvedEvent(t *testing.T, l *ledgerFile, op *ledger.Operation, note string) {
	t.Helper()
	evs, err := l.store.EventList(context.Background(), op.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Kind != ledger.EventResolved {
			continue
		}
		var d map[string]string
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatal(err)
		}
		if d["actor"] == "" || d["note"] != note {
			t.Errorf("resolved event = %s, want an actor and the note %q", ev.Data, note)
		}
		return
	}
	t.Errorf("no %s event among %d events", ledger.EventResolved, len(evs))
}

func TestResolveDuplicates(t *testing.T) {
	l := newLedger(t)
	op := l.sending(t, l.accept(t, "acme", "op-duplicates", false))
	if _, err := l.store.Transition(context.Background(), &ledger.TransitionParams{
		OperationRef: op.ID, From: []ledger.State{ledger.StateSending}, To: ledger.StateRunning,
		RemoteJobs: []*ledger.RemoteJobUpsert{
			{Upstream: "hosted_test", RemoteJobID: "job-intended", Kind: "provider_job", Status: ledger.JobRunning, Intended: new(true)},
			{Upstream: "hosted_test", RemoteJobID: "job-dup-1", Kind: "provider_job", Status: ledger.JobRunning, Duplicate: new(true)},
			{Upstream: "hosted_test", RemoteJobID: "job-dup-2", Kind: "provider_job", Status: ledger.JobRunning, Duplicate: new(true)},
		},
	}); err != nil {
		t.Fatal(err)
	}

	out := l.ok(t, "ops", "resolve", op.OperationID, "--accept-duplicate", "job-dup-1")
	if !strings.Contains(out, "is running") || !strings.Contains(out, "duplicate remote job job-dup-1 as accepted") {
		t.Errorf("ops resolve --accept-duplicate printed\n%s", out)
	}
	out = l.ok(t, "ops", "resolve", op.TaskID, "--cancel-duplicate", "job-dup-2")
	if !strings.Contains(out, "the gateway will ask the provider to cancel remote job job-dup-2") {
		t.Errorf("ops resolve --cancel-duplicate printed\n%s", out)
	}
	if n := l.jobCount(t, worker.CancelArgs{}.Kind()); n != 1 {
		t.Errorf("%d cancel jobs queued, want 1", n)
	}
	jobs, err := l.store.RemoteJobList(context.Background(), op.ID)
	if err != nil {
		t.Fatal(err)
	}
	resolved := map[string]string{}
	for _, j := range jobs {
		resolved[j.RemoteJobID] = j.DuplicateResolved
	}
	if len(jobs) != 3 || resolved["job-dup-1"] != "accepted" || resolved["job-dup-2"] != "" {
		t.Errorf("remote jobs resolved = %v, want job-dup-1 accepted and job-dup-2 still open until the provider cancels it", resolved)
	}

	checkFailure(t, l.run(t, "ops", "resolve", op.OperationID, "--accept-duplicate", "job-unknown"), "has no remote job job-unknown", false)
	checkFailure(t, l.run(t, "ops", "resolve", op.OperationID, "--cancel-duplicate", "job-intended"), "remote job job-intended of operation op-duplicates is not a duplicate", false)
	if jobs, err := l.store.RemoteJobList(context.Background(), op.ID); err != nil || len(jobs) != 3 {
		t.Errorf("after refused resolutions the operation has %d remote jobs (%v), want still 3", len(jobs), err)
	}
}

func TestResolveUsage(t *testing.T) {
	l := newLedger(t)
	op := l.inReview(t, "op-usage")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no action", []string{op.OperationID}, "one of --attach, --resend, --fail, --accept-duplicate, --cancel-duplicate is required"},
		{"two actions", []string{op.OperationID, "--resend", "--fail"}, "--resend and --fail cannot be combined"},
		{"attach and resend", []string{op.OperationID, "--attach", "job-1", "--resend"}, "--attach and --resend cannot be combined"},
		{"empty job", []string{op.OperationID, "--attach", ""}, "--attach was given without effect"},
		{"no operation", []string{"--fail"}, "expected one argument, the operation ID or task ID; got 0"},
		{"two operations", []string{op.OperationID, "op-other", "--fail"}, "expected one argument, the operation ID or task ID; got 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkFailure(t, l.run(t, append([]string{"ops", "resolve"}, tc.args...)...), tc.want, true)
		})
	}
	if got := l.operation(t, op); got.State != ledger.StateReview {
		t.Errorf("after only usage errors the operation is %s, want still review", got.State)
	}
	checkFailure(t, l.run(t, "ops", "resolve", "op-missing", "--fail"), `no operation "op-missing"`, false)
}
