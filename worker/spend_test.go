package worker_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/dburl"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
	"github.com/taskgate/taskgate/worker"
)

// reconciledWith reports whether a reconciliation of op recorded what ok
// looks for.
func reconciledWith(t *testing.T, ctx context.Context, s ledger.Store, op *ledger.Operation, ok func(map[string]any) bool) bool {
	t.Helper()
	for _, ev := range events(t, ctx, s, op, ledger.EventReconciled) {
		if ok(ev) {
			return true
		}
	}
	return false
}

// The cost ceiling is the approval's, not each operation's: two
// operations under one approval (the second a retry under a new operation
// ID, which the approval's job limit admits) whose final charges together
// exceed the ceiling are a cost boundary breach, though each is under it.
func TestCostBreachCountsTheWholeApproval(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	overcharge, err := providersim.ParseMicros("23.10")
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, &fixtures.Options{
		Config: fixtures.ConfigOptions{Approval: true, Lease: time.Second},
		Sim:    providersim.Options{JobDuration: 300 * time.Millisecond, Faults: providersim.Faults{Overcharge: overcharge}},
	})
	approve(t, ctx, h.Store, "op-breach-a", "42.00", 2)
	logHistory(t, h.Store, "op-breach-a")
	logHistory(t, h.Store, "op-breach-b")
	cs := connect(t, ctx, h, fixtures.EraExtension)
	startTask(t, ctx, cs, "op-breach-a")
	startTask(t, ctx, cs, "op-breach-b")
	var ops []*ledger.Operation
	for _, id := range []string{"op-breach-a", "op-breach-b"} {
		op := awaitOperation(t, ctx, h.Store, id, ended)
		if op.State != ledger.StateCompleted || op.ApprovalID == 0 {
			t.Fatalf("operation %s = %s under approval %d, want completed under the approval", id, op.State, op.ApprovalID)
		}
		waitFor(t, ctx, id+"'s final charge is reconciled", func() bool {
			return reconciledWith(t, ctx, h.Store, op, func(ev map[string]any) bool { return ev["final_cost"] == "23.10" })
		})
		ops = append(ops, op)
	}
	// Whichever settled last saw the approval's total.
	for _, op := range ops {
		waitFor(t, ctx, op.OperationID+"'s reservation settles", func() bool {
			return reservation(t, ctx, h.Store, op).Status == ledger.ReservationSettled
		})
	}
	var breaches []map[string]any
	waitFor(t, ctx, "a cost boundary breach is recorded for 46.20 USD charged under a 42.00 USD ceiling", func() bool {
		breaches = nil
		for _, op := range ops {
			breaches = append(breaches, events(t, ctx, h.Store, op, ledger.EventCostBoundaryBreach)...)
		}
		return len(breaches) > 0
	})
	found := false
	for _, b := range breaches {
		if b["approval_total"] == "46.20" && b["ceiling"] == "42.00" && b["over_by"] == "4.20" {
			found = true
		}
	}
	if !found {
		t.Errorf("breaches = %v, want one with approval_total 46.20, ceiling 42.00, over_by 4.20", breaches)
	}
}

// A completed job of a priced tool without an invoice keeps its
// reservation held: it may still be charged.
func TestNoSettlementWithoutAnInvoice(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	h := newHarness(t, &fixtures.Options{
		Config: fixtures.ConfigOptions{Approval: true, Lease: time.Second},
		Sim:    providersim.Options{JobDuration: 200 * time.Millisecond, Faults: providersim.Faults{NoInvoice: true}},
	})
	const opID = "op-no-invoice"
	approve(t, ctx, h.Store, opID, "20.00", 1)
	logHistory(t, h.Store, opID)
	cs := connect(t, ctx, h, fixtures.EraExtension)
	startTask(t, ctx, cs, opID)
	op := awaitOperation(t, ctx, h.Store, opID, ended)
	if op.State != ledger.StateCompleted {
		t.Fatalf("operation = %s, want completed", op.State)
	}
	waitFor(t, ctx, "reconciliation notices the missing invoice", func() bool {
		return reconciledWith(t, ctx, h.Store, op, func(ev map[string]any) bool { return ev["missing_invoice"] == true })
	})
	if r := reservation(t, ctx, h.Store, op); r.Status != ledger.ReservationHeld {
		t.Errorf("reservation = %s (settled %s), want held until the invoice arrives", r.Status, r.Settled)
	}
}

// However often reconciliation is asked for, one reconciler per operation
// waits in the queue.
func TestOneReconcilerPerOperation(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	s, err := dburl.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "taskgate.db"), &dburl.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var refs []int64
	for _, id := range []string{"op-a", "op-b"} {
		res, err := s.Accept(ctx, &ledger.AcceptParams{
			Tenant: tenant, OperationID: id, Upstream: "hosted_test", Tool: "run_suite", Fingerprint: "fp-" + id,
			Arguments: json.RawMessage(`{}`), RequestID: ledger.NewRequestID(), TaskID: ledger.NewTaskID(), Source: "test",
			Approval: ledger.ApprovalRequirement{Estimate: money.Zero("USD")},
		})
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, res.Operation.ID)
	}
	for range 3 {
		for _, ref := range refs {
			if _, err := s.Transition(ctx, &ledger.TransitionParams{
				OperationRef: ref, Enqueue: []river.InsertManyParams{{Args: worker.ReconcileArgs{Operation: ref}}},
			}); err != nil {
				t.Fatalf("queue a reconciliation: %v", err)
			}
		}
	}
	jc, err := s.NewJobClient(&river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := jc.JobList(ctx, river.NewJobListParams().Kinds(worker.ReconcileArgs{}.Kind()).
		States(rivertype.JobStateAvailable, rivertype.JobStateScheduled).First(100))
	if err != nil {
		t.Fatal(err)
	}
	per := map[int64]int{}
	for _, j := range res.Jobs {
		var args worker.ReconcileArgs
		if err := json.Unmarshal(j.EncodedArgs, &args); err != nil {
			t.Fatal(err)
		}
		per[args.Operation]++
	}
	for _, ref := range refs {
		if per[ref] != 1 {
			t.Errorf("queued reconcilers of operation %d = %d, want 1", ref, per[ref])
		}
	}
}
