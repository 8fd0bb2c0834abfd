package worker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/crashpoint"
	"github.com/taskgate/taskgate/internal/pgtest"
	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
	"github.com/taskgate/taskgate/taskwire"
)

// The replica tests run two gateway processes on one PostgreSQL ledger in
// front of one provider. Replica A stops at a crash point and is killed
// with SIGKILL, never to come back; replica B alone must take the
// operation over once A's lease lapses and finish it.
const (
	replicaLease = time.Second
	// replicaSweep is the harness configuration's worker.sweep.
	replicaSweep = 250 * time.Millisecond
	// takeoverSlack covers what the lease and the sweep interval do not:
	// the sweep's own query and commit, and scheduling on a loaded machine.
	takeoverSlack = time.Second
)

// replicaRun is what a replica test saw.
type replicaRun struct {
	h      *fixtures.Harness
	b      *fixtures.Replica
	op     *ledger.Operation
	taskID string
	// aWorker is the worker identity of replica A's lease, as its
	// send_started event names it; empty when A never sent.
	aWorker string
}

// workerID is the worker identity of a lease owner "worker/job".
func workerID(owner string) string {
	if i := strings.LastIndexByte(owner, '/'); i >= 0 {
		return owner[:i]
	}
	return owner
}

// killReplica starts replica A with TASKGATE_CRASHPOINT=point and replica
// B without it, both on a fresh PostgreSQL schema. A 2025-11-25 client
// makes the consequential call opID through A; A stops at point and is
// killed. The client then reconnects to B and reads its task there with
// tasks/get while B recovers the operation. killReplica waits until the
// operation ends and checks that B took over within lease + sweep of A's
// death, that the provider ran exactly one job, that the operation
// completed with it and that its receipt is complete without duplicates.
//
// takeover names the event by which B takes over: "recovered" when A died
// holding the operation's lease, "send_started" when A died before any
// worker had it.
func killReplica(t *testing.T, ctx context.Context, point string, cfg fixtures.ConfigOptions, sim providersim.Options, opID string, takeover ledger.EventKind) *replicaRun {
	t.Helper()
	db := pgtest.Schema(t)
	cfg.Lease = replicaLease
	// Every call that reaches the provider starts a job of its own: its
	// count of jobs is the count of sends that reached it.
	sim.Faults.IgnoreIdempotencyKey = true
	h := newHarness(t, &fixtures.Options{
		DB:      db,
		Process: []string{gatewayBinary},
		Env:     []string{"TASKGATE_CRASHPOINT=" + point},
		Config:  cfg,
		Sim:     sim,
	})
	h.SetEnv() // replica B runs without a crash point
	logHistory(t, h.Store, opID)
	run := &replicaRun{h: h}

	startB := func() time.Time {
		t.Helper()
		run.b = startReplica(t, ctx, h, "replica B")
		return time.Now()
	}
	// A crash point on the request path stops A before any worker could
	// have the operation, so B may run beside A from the start. The others
	// are on the worker's path, and B's worker would take the dispatch job
	// from A's as often as not: there B starts once A is stopped at the
	// point, with the operation held by A's worker.
	inRequest := point == crashpoint.AfterAcceptCommit
	var bUp time.Time
	if inRequest {
		bUp = startB()
	}

	key, err := h.Key(ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	onA, err := fixtures.Dial(ctx, h.MCPURL(), key, fixtures.EraLegacy, nil)
	if err != nil {
		t.Fatalf("connect a 2025-11-25 client to replica A: %v", err)
	}
	t.Cleanup(func() { onA.Close() })

	// With the crash on the request path the call is in flight when A
	// dies, and its answer is never written; otherwise A answered with the
	// task before its worker reached the point.
	first := make(chan error, 1)
	if inRequest {
		callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		go func() {
			task, res, err := taskwire.CallToolAsTask(callCtx, onA, fixtures.RunSuiteCall(opID, nil), nil)
			if err == nil {
				err = errors.New("got an answer")
				if task != nil {
					err = errors.New("got task " + task.ID)
				} else if res != nil {
					err = errors.New("got a result naming job " + fixtures.ResultJob(res))
				}
			}
			first <- err
		}()
	} else {
		run.taskID = startTask(t, ctx, onA, opID).ID
	}

	if err := h.WaitOutput(ctx, "CRASHPOINT "+point); err != nil {
		t.Fatal(err)
	}
	crashed := time.Now()
	if !inRequest {
		bUp = startB()
	}
	if err := h.Kill(); err != nil {
		t.Fatalf("kill replica A: %v", err)
	}
	if inRequest {
		if err := <-first; err == nil || ctx.Err() != nil {
			t.Fatalf("the call in flight on replica A ended with %v (test context: %v); want a broken connection", err, ctx.Err())
		}
	}

	// The client's session lived on A and died with it: it reconnects to
	// B. A client that never got its task handle retries the call, which
	// attaches to the operation.
	onB, err := fixtures.Dial(ctx, run.b.MCPURL(), key, fixtures.EraLegacy, nil)
	if err != nil {
		t.Fatalf("reconnect the 2025-11-25 client to replica B: %v", err)
	}
	t.Cleanup(func() { onB.Close() })
	if run.taskID == "" {
		run.taskID = startTask(t, ctx, onB, opID).ID
	}
	got, err := taskwire.GetTask(ctx, onB, run.taskID)
	if err != nil {
		t.Fatalf("tasks/get %s on replica B: %v", run.taskID, err)
	}
	if got.ID != run.taskID {
		t.Errorf("tasks/get %s on replica B answered task %s", run.taskID, got.ID)
	}
	if got.Status == taskwire.StatusFailed || got.Status == taskwire.StatusCancelled {
		t.Errorf("tasks/get %s on replica B = %s (%s) while the operation is recovered", run.taskID, got.Status, got.StatusMessage)
	}

	op := awaitOperation(t, ctx, h.Store, opID, endedOrReview)
	run.op = op
	if op.TaskID != run.taskID {
		t.Errorf("the client holds task %s, the operation's task is %s", run.taskID, op.TaskID)
	}
	assertOneJob(t, h, op)

	// B took over within lease + sweep of the later of A's stop and B's
	// start: A's last heartbeat came before it stopped.
	from := crashed
	if bUp.After(from) {
		from = bUp
	}
	if !inRequest {
		// A's worker made the first send.
		if sends := events(t, ctx, h.Store, op, ledger.EventSendStarted); len(sends) > 0 {
			w, _ := sends[0]["worker"].(string)
			run.aWorker = workerID(w)
		}
	}
	evs, err := h.Store.EventList(ctx, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	var at time.Time
	for _, ev := range evs {
		if ev.Kind == takeover {
			at = ev.CreatedAt
			break
		}
	}
	if at.IsZero() {
		t.Fatalf("no %s event: replica B never took the operation over", takeover)
	}
	if bound := replicaLease + replicaSweep + takeoverSlack; at.Sub(from) > bound {
		t.Errorf("replica B took over (%s) %v after replica A stopped, want within %v (lease %v + sweep %v + %v)",
			takeover, at.Sub(from).Round(time.Millisecond), bound, replicaLease, replicaSweep, takeoverSlack)
	}
	if takeover == ledger.EventRecovered {
		rec := events(t, ctx, h.Store, op, ledger.EventRecovered)
		lapsed, _ := rec[0]["lapsed_owner"].(string)
		if run.aWorker == "" || workerID(lapsed) != run.aWorker {
			t.Errorf("recovered a lease of %q, want replica A's worker %q", lapsed, run.aWorker)
		}
	}

	// The receipt: one job, the one used, no duplicates, reconciled.
	r := awaitReceipt(t, ctx, h.Store, op)
	jobID := h.Sim.Jobs()[0].ID
	if r.ObservedRemoteJobs != 1 || r.DuplicateJobs != 0 || r.ResultUsed != jobID {
		t.Errorf("receipt: observed remote jobs %d, duplicates %d, result used %q; want 1, 0, %q",
			r.ObservedRemoteJobs, r.DuplicateJobs, r.ResultUsed, jobID)
	}
	if r.ReviewStatus != receipt.ReviewReady {
		t.Errorf("receipt review status = %s (next actions %+v), want %s", r.ReviewStatus, r.NextActions, receipt.ReviewReady)
	}

	// B answers for the task to the end: completed, with the job's result.
	done, err := taskwire.GetTask(ctx, onB, run.taskID)
	if err != nil {
		t.Fatalf("tasks/get %s on replica B after the end: %v", run.taskID, err)
	}
	if done.Status != taskwire.StatusCompleted {
		t.Errorf("tasks/get %s on replica B = %s (%s), want completed", run.taskID, done.Status, done.StatusMessage)
	}
	res, err := taskwire.TaskResult(ctx, onB, run.taskID)
	if err != nil {
		t.Fatalf("tasks/result %s on replica B: %v", run.taskID, err)
	}
	if got := fixtures.ResultJob(res); got != jobID {
		t.Errorf("tasks/result on replica B names job %q, want %q", got, jobID)
	}
	return run
}

// awaitReceipt polls until op's receipt is reconciled completely, and
// returns it.
func awaitReceipt(t *testing.T, ctx context.Context, s ledger.Store, op *ledger.Operation) *receipt.Receipt {
	t.Helper()
	var last *receipt.Receipt
	testwait.Until(t, ctx, "the receipt of "+op.OperationID+" to be reconciled completely", func() (bool, error) {
		cur, err := s.OperationGet(ctx, &ledger.OperationGetParams{ID: op.ID})
		if err != nil {
			return false, err
		}
		in, err := receipt.Load(ctx, s, cur, nil)
		if err != nil {
			return false, err
		}
		last = receipt.Build(in)
		if last.ReconciliationStatus != receipt.ReconciliationComplete {
			return false, fmt.Errorf("reconciliation %s, review %s, next actions %+v", last.ReconciliationStatus, last.ReviewStatus, last.NextActions)
		}
		return true, nil
	})
	return last
}

// Replica A dies right after committing an acceptance, before it answers:
// B dispatches the queued operation, and the client's retry on B attaches.
func TestReplicaKilledAfterAcceptCommit(t *testing.T) {
	ctx := testCtx(t, 90*time.Second)
	run := killReplica(t, ctx, crashpoint.AfterAcceptCommit, fixtures.ConfigOptions{}, providersim.Options{}, "op-replica-accept", ledger.EventSendStarted)
	if got := lookups(t, ctx, run.h.Store, run.op); len(got) != 0 {
		t.Errorf("lookups = %v, want none: nothing had been sent", got)
	}
	if run.op.SendCount != 1 {
		t.Errorf("send count = %d, want 1", run.op.SendCount)
	}
	atts, err := run.h.Store.AttemptList(ctx, run.op.ID)
	if err != nil {
		t.Fatal(err)
	}
	var decisions []ledger.Decision
	for _, a := range atts {
		decisions = append(decisions, a.Decision)
	}
	if want := []ledger.Decision{ledger.DecisionCreated, ledger.DecisionAttached}; !slices.Equal(decisions, want) {
		t.Errorf("attempt decisions = %v, want %v", decisions, want)
	}
}

// Replica A dies after committing "send started", before the call left: B
// looks the operation up, finds nothing and, as the contract allows at
// once, sends it the one time.
func TestReplicaKilledAfterSendStarted(t *testing.T) {
	ctx := testCtx(t, 90*time.Second)
	cfg := fixtures.ConfigOptions{NotFoundSafeAfter: new(time.Duration(0))}
	run := killReplica(t, ctx, crashpoint.AfterSendStarted, cfg, providersim.Options{}, "op-replica-send", ledger.EventRecovered)
	if got, want := lookups(t, ctx, run.h.Store, run.op), [][2]string{{"not_found", "resend"}}; !slices.Equal(got, want) {
		t.Errorf("lookups (answer, action) = %v, want %v", got, want)
	}
	if run.op.SendCount != 2 {
		t.Errorf("send count = %d, want 2 (A's lost send and B's)", run.op.SendCount)
	}
	sends := events(t, ctx, run.h.Store, run.op, ledger.EventSendStarted)
	if len(sends) != 2 {
		t.Fatalf("send_started events = %v, want 2", sends)
	}
	if w, _ := sends[1]["worker"].(string); workerID(w) == run.aWorker {
		t.Errorf("the re-send was by %q, replica A's worker", w)
	}
}

// Replica A dies after the provider accepted the call, before the remote
// job was bound: B finds the running job by lookup, attaches, never
// re-sends.
func TestReplicaKilledAfterUpstreamAccept(t *testing.T) {
	ctx := testCtx(t, 90*time.Second)
	run := killReplica(t, ctx, crashpoint.AfterUpstreamAccept, fixtures.ConfigOptions{}, providersim.Options{JobDuration: 4 * time.Second}, "op-replica-upstream", ledger.EventRecovered)
	if got, want := lookups(t, ctx, run.h.Store, run.op), [][2]string{{"running", "attach_to_existing_job"}}; !slices.Equal(got, want) {
		t.Errorf("lookups (answer, action) = %v, want %v", got, want)
	}
	if run.op.SendCount != 1 {
		t.Errorf("send count = %d, want 1", run.op.SendCount)
	}
}

// Replica A dies while following the bound remote job: B goes on following
// it, with no lookup and no send.
func TestReplicaKilledWhilePolling(t *testing.T) {
	ctx := testCtx(t, 90*time.Second)
	run := killReplica(t, ctx, crashpoint.WhilePolling, fixtures.ConfigOptions{}, providersim.Options{JobDuration: 2 * time.Second}, "op-replica-polling", ledger.EventRecovered)
	if got := lookups(t, ctx, run.h.Store, run.op); len(got) != 0 {
		t.Errorf("lookups = %v, want none: the job was bound, so B resumes polling", got)
	}
	recovered := events(t, ctx, run.h.Store, run.op, ledger.EventRecovered)
	if len(recovered) == 0 || recovered[0]["state"] != string(ledger.StateRunning) {
		t.Errorf("recovered events = %v, want one for the running operation", recovered)
	}
	if run.op.SendCount != 1 {
		t.Errorf("send count = %d, want 1", run.op.SendCount)
	}
}

// A replica dies while it reconciles an operation. Its reconcile job stays
// running in the queue, and no other can be queued for the operation
// meanwhile: replica B's job queue must rescue it (see reconcileTimeout)
// and complete the receipt. Without a timeout on reconcile jobs, River
// never rescues them and the receipt stays incomplete.
func TestReplicaKilledWhileReconciling(t *testing.T) {
	ctx := testCtx(t, 150*time.Second)
	h := newHarness(t, &fixtures.Options{
		DB:      pgtest.Schema(t),
		Process: []string{gatewayBinary},
		Env:     []string{"TASKGATE_CRASHPOINT=" + crashpoint.WhileReconciling},
		Config:  fixtures.ConfigOptions{Lease: replicaLease},
	})
	h.SetEnv()
	const opID = "op-replica-reconciling"
	logHistory(t, h.Store, opID)
	startTask(t, ctx, connect(t, ctx, h, fixtures.EraExtension), opID)
	if err := h.WaitOutput(ctx, "CRASHPOINT "+crashpoint.WhileReconciling); err != nil {
		t.Fatal(err)
	}
	// B starts once A's worker holds the reconcile job, so that it is A's
	// death that leaves the job running.
	startReplica(t, ctx, h, "replica B")
	if err := h.Kill(); err != nil {
		t.Fatalf("kill replica A: %v", err)
	}
	op := awaitOperation(t, ctx, h.Store, opID, ended)
	rec := awaitReceipt(t, ctx, h.Store, op)
	if jobs := h.Sim.Jobs(); len(jobs) != 1 {
		t.Fatalf("provider jobs = %d (%+v), want 1", len(jobs), jobs)
	}
	if op.State != ledger.StateCompleted || rec.ObservedRemoteJobs != 1 || rec.DuplicateJobs != 0 {
		t.Fatalf("operation %s, receipt: %d observed jobs, %d duplicates; want completed, 1 and 0", op.State, rec.ObservedRemoteJobs, rec.DuplicateJobs)
	}
}
