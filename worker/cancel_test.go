package worker_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
	"github.com/taskgate/taskgate/taskwire"
	"github.com/taskgate/taskgate/worker"
)

// approve records the user's approval of opID for run_suite: up to 20.00
// USD and one remote job.
func approve(t *testing.T, ctx context.Context, s ledger.Store, opID, ceiling string, jobs int) *ledger.Approval {
	t.Helper()
	a, err := s.ApprovalCreate(ctx, &ledger.Approval{
		Tenant: tenant, OperationID: opID, Tool: "hosted_test.run_suite", MaxTotalCost: money.MustParse(ceiling, "USD"),
		MaxRemoteJobs: jobs, RetryPolicy: "lookup_then_attach", ExpiresAt: time.Now().Add(time.Hour), CreatedBy: "test",
	})
	if err != nil {
		t.Fatalf("approve %s: %v", opID, err)
	}
	return a
}

// reservation is the operation's spend reservation.
func reservation(t *testing.T, ctx context.Context, s ledger.Store, op *ledger.Operation) *ledger.Reservation {
	t.Helper()
	rs, err := s.ReservationList(ctx, op.ApprovalID)
	if err != nil {
		t.Fatalf("reservations of approval %d: %v", op.ApprovalID, err)
	}
	for _, r := range rs {
		if r.OperationRef == op.ID {
			return r
		}
	}
	t.Fatalf("operation %s has no reservation under approval %d", op.OperationID, op.ApprovalID)
	return nil
}

// waitFor waits until cond holds, failing t if ctx ends first.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, ctx, what, func() (bool, error) { return cond(), nil })
}

// simJob is the provider's one job, once it has one.
func simJob(sim *providersim.Sim) (providersim.Job, bool) {
	jobs := sim.Jobs()
	if len(jobs) != 1 {
		return providersim.Job{}, false
	}
	return jobs[0], true
}

// Cancellation arrives while the send is in flight: the provider has the
// call but has not answered. The operation is cancelled at once; when the
// provider's answer comes, the job it started must be recorded and
// cancelled at the provider, and until it is known no reconciliation may
// call the operation complete or free its reservation.
func TestCancelWhileSending(t *testing.T) {
	tests := []struct {
		name  string
		tasks string // the upstream's tasks setting
		edit  func(*testing.T, string) string
		job   time.Duration
		// reversible: the job is still running when the cancellation
		// reaches the provider, so it ends cancelled.
		reversible bool
	}{
		{name: "tasks upstream without lookup", tasks: "auto", edit: withoutLookup, job: 5 * time.Second, reversible: true},
		{name: "direct call without lookup", tasks: "off", edit: withoutLookup, job: 200 * time.Millisecond},
		{name: "tasks upstream with lookup", tasks: "auto", job: 5 * time.Second, reversible: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t, 60*time.Second)
			sim := providersim.New(&providersim.Options{JobDuration: tt.job})
			t.Cleanup(func() { sim.Close() })
			counter := countCalls(sim.HTTPHandler())
			gate := newCallGate(counter, "run_suite")
			t.Cleanup(gate.release)
			var setup []func(*gatewaySetup)
			if tt.edit != nil {
				setup = append(setup, withConfig(tt.edit))
			}
			g := startGateway(t, serve(t, gate), fixtures.ConfigOptions{
				Approval: true, Tasks: tt.tasks, UpstreamTimeout: 20 * time.Second, Lease: time.Second,
			}, setup...)
			opID := "op-cancel-sending-" + strings.ReplaceAll(tt.name, " ", "-")
			logHistory(t, g.Store, opID)
			approve(t, ctx, g.Store, opID, "20.00", 1)
			cs := g.connect(t, ctx, fixtures.EraExtension)
			task := startTask(t, ctx, cs, opID)
			gate.await(t, ctx)

			if _, err := taskwire.CancelTask(ctx, cs, task.ID); err != nil {
				t.Fatalf("tasks/cancel: %v", err)
			}
			op := awaitOperation(t, ctx, g.Store, opID, ended)
			if op.State != ledger.StateCancelled {
				t.Fatalf("operation = %s, want cancelled", op.State)
			}
			// The provider has not answered: nothing is known yet.
			waitFor(t, ctx, "the cancellation's reconciliation ran", func() bool {
				return len(events(t, ctx, g.Store, op, ledger.EventReconciled)) > 0
			})
			first := events(t, ctx, g.Store, op, ledger.EventReconciled)[0]
			if first["complete"] != false || first["lookup"] != "indeterminate" {
				t.Errorf("reconciliation before the provider answered = %v, want lookup indeterminate and not complete", first)
			}
			if r := reservation(t, ctx, g.Store, op); r.Status != ledger.ReservationHeld {
				t.Errorf("reservation before the provider answered = %s, want held", r.Status)
			}

			gate.release()
			var pj providersim.Job
			waitFor(t, ctx, "the provider started a job", func() (ok bool) { pj, ok = simJob(sim); return ok })
			waitFor(t, ctx, "the provider's job is in the ledger", func() bool {
				jobs, err := g.Store.RemoteJobList(ctx, op.ID)
				return err == nil && len(jobs) == 1 && jobs[0].RemoteJobID == pj.ID
			})
			waitFor(t, ctx, "the provider was asked to cancel the job", func() bool {
				for _, ev := range events(t, ctx, g.Store, op, ledger.EventCancelSent) {
					if ev["remote_job_id"] == pj.ID && ev["error"] == nil {
						return counter.count("cancel_job") > 0
					}
				}
				return false
			})
			if tt.reversible {
				waitFor(t, ctx, "the provider's job is cancelled", func() bool {
					j, _ := simJob(sim)
					return j.Status == providersim.StatusCancelled
				})
			}
			waitFor(t, ctx, "reconciliation is complete", func() bool {
				for _, ev := range events(t, ctx, g.Store, op, ledger.EventReconciled) {
					if ev["complete"] == true {
						return true
					}
				}
				return false
			})
			for _, ev := range events(t, ctx, g.Store, op, ledger.EventReconciled) {
				if ev["complete"] == true && ev["jobs"] != float64(1) {
					t.Errorf("reconciliation %v called the operation complete without its one job", ev)
				}
			}
			if r := reservation(t, ctx, g.Store, op); r.Status != ledger.ReservationSettled {
				t.Errorf("reservation = %s, want settled by the job's charges", r.Status)
			}
			g.stop(t)
			if n := counter.count("run_suite"); n != 1 {
				t.Errorf("run_suite calls at the provider = %d, want 1", n)
			}
		})
	}
}

// An operation cancelled before it was sent, whose tool the configuration
// no longer has, still gets its reservation released: no job can exist.
func TestCancelBeforeSendOfAToolNoLongerConfigured(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	sim := providersim.New(&providersim.Options{})
	t.Cleanup(func() { sim.Close() })
	g := startGateway(t, serve(t, sim.HTTPHandler()), fixtures.ConfigOptions{Approval: true, Lease: time.Second},
		withConfig(func(t *testing.T, y string) string {
			return replaceOnce(t, y, "      run_suite:\n        consequential: true", "      run_suite_v2:\n        consequential: true")
		}))
	const opID = "op-cancel-unconfigured"
	logHistory(t, g.Store, opID)
	approve(t, ctx, g.Store, opID, "20.00", 1)
	// An operation accepted while the tool was configured, and cancelled
	// before any worker sent it.
	res, err := g.Store.Accept(ctx, &ledger.AcceptParams{
		Tenant: tenant, OperationID: opID, Upstream: "hosted_test", Tool: "run_suite", Fingerprint: "fp-unconfigured",
		Arguments: json.RawMessage(`{"suite":"settlement"}`), RequestID: ledger.NewRequestID(), TaskID: ledger.NewTaskID(), Source: "test",
		Approval: ledger.ApprovalRequirement{Required: true, Estimate: money.MustParse("18.00", "USD")},
	})
	if err != nil || res.Decision != ledger.DecisionCreated {
		t.Fatalf("accept: %+v, %v", res, err)
	}
	op, err := g.Store.Transition(ctx, &ledger.TransitionParams{
		OperationRef: res.Operation.ID, CancelRequested: true, To: ledger.StateCancelled,
		Events:  []ledger.EventParams{{Kind: ledger.EventCancellationRequested}},
		Enqueue: []river.InsertManyParams{{Args: worker.CancelArgs{Operation: res.Operation.ID}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the reservation is released", func() bool {
		return reservation(t, ctx, g.Store, op).Status == ledger.ReservationReleased
	})
	if n := len(sim.Jobs()); n != 0 {
		t.Errorf("provider jobs = %d, want 0", n)
	}
}

// A cancellation the provider fails to take is asked again.
func TestFailedProviderCancelIsRetried(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	sim := providersim.New(&providersim.Options{JobDuration: 10 * time.Second})
	t.Cleanup(func() { sim.Close() })
	flaky := &failCalls{next: sim.HTTPHandler(), tool: "cancel_job", left: 1}
	g := startGateway(t, serve(t, flaky), fixtures.ConfigOptions{Lease: time.Second})
	const opID = "op-cancel-retried"
	logHistory(t, g.Store, opID)
	cs := g.connect(t, ctx, fixtures.EraExtension)
	task := startTask(t, ctx, cs, opID)
	awaitOperation(t, ctx, g.Store, opID, func(op *ledger.Operation) bool { return op.State == ledger.StateRunning })
	if _, err := taskwire.CancelTask(ctx, cs, task.ID); err != nil {
		t.Fatalf("tasks/cancel: %v", err)
	}
	waitFor(t, ctx, "the provider's job is cancelled", func() bool {
		j, ok := simJob(sim)
		return ok && j.Status == providersim.StatusCancelled
	})
	op := awaitOperation(t, ctx, g.Store, opID, ended)
	// The provider's record changes before the ledger's.
	var failed, taken int
	waitFor(t, ctx, "the cancellation the provider took is recorded", func() bool {
		failed, taken = 0, 0
		for _, ev := range events(t, ctx, g.Store, op, ledger.EventCancelSent) {
			if ev["error"] != nil {
				failed++
			} else {
				taken++
			}
		}
		return taken > 0
	})
	if failed != 1 || taken != 1 {
		t.Errorf("cancel_sent events: %d failed, %d taken; want 1 and 1", failed, taken)
	}
}

// A job that shows up at the provider only after the operation was
// cancelled (the provider's index lags, and its answer to the send was
// lost) is found by reconciliation, which keeps looking while a send is
// unaccounted for, and is cancelled as soon as it is seen.
func TestLateJobOfACancelledOperationIsCancelled(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	sim := providersim.New(&providersim.Options{JobDuration: 30 * time.Second, Faults: providersim.Faults{
		DropResponseAfterAccept: 1, LookupDelay: 3 * time.Second,
	}})
	t.Cleanup(func() { sim.Close() })
	gate := newCallGate(sim.HTTPHandler(), "run_suite")
	t.Cleanup(gate.release)
	g := startGateway(t, serve(t, gate), fixtures.ConfigOptions{UpstreamTimeout: time.Second, Lease: time.Second})
	const opID = "op-late-job"
	logHistory(t, g.Store, opID)
	cs := g.connect(t, ctx, fixtures.EraExtension)
	task := startTask(t, ctx, cs, opID)
	gate.await(t, ctx)
	if _, err := taskwire.CancelTask(ctx, cs, task.ID); err != nil {
		t.Fatalf("tasks/cancel: %v", err)
	}
	op := awaitOperation(t, ctx, g.Store, opID, ended)
	gate.release()
	var pj providersim.Job
	waitFor(t, ctx, "the provider started a job", func() (ok bool) { pj, ok = simJob(sim); return ok })
	waitFor(t, ctx, "the provider's job is cancelled", func() bool {
		j, _ := simJob(sim)
		return j.Status == providersim.StatusCancelled
	})
	observed := false
	for _, ev := range events(t, ctx, g.Store, op, ledger.EventRemoteJobObserved) {
		observed = observed || ev["remote_job_id"] == pj.ID
	}
	if !observed {
		t.Errorf("no remote_job_observed event for %s: reconciliation should have found it", pj.ID)
	}
}

// TestKeptCancelWhileSending: under client_cancel: before_send, a cancel
// that comes while the call is with the provider is kept, and the status
// saying so survives the binding of the provider's task and every poll
// after it, with the provider's progress behind it.
func TestKeptCancelWhileSending(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	sim := providersim.New(&providersim.Options{JobDuration: 5 * time.Second})
	t.Cleanup(func() { sim.Close() })
	counter := countCalls(sim.HTTPHandler())
	gate := newCallGate(counter, "run_suite")
	t.Cleanup(gate.release)
	g := startGateway(t, serve(t, gate), fixtures.ConfigOptions{
		Approval: true, Tasks: "auto", UpstreamTimeout: 20 * time.Second, Lease: time.Second,
	}, withConfig(func(t *testing.T, y string) string {
		return replaceOnce(t, y, "retry_policy: lookup_then_attach", "client_cancel: before_send\n        retry_policy: lookup_then_attach")
	}))
	const opID = "op-kept-while-sending"
	approve(t, ctx, g.Store, opID, "20.00", 1)
	cs := g.connect(t, ctx, fixtures.EraExtension)
	task := startTask(t, ctx, cs, opID)
	gate.await(t, ctx)
	if _, err := taskwire.CancelTask(ctx, cs, task.ID); err != nil {
		t.Fatalf("tasks/cancel: %v; want the acknowledgement", err)
	}
	gate.release()
	waitFor(t, ctx, "the provider's progress is behind the reason the cancel was kept", func() bool {
		got, err := taskwire.GetTask(ctx, cs, task.ID)
		if err != nil || got.Status == taskwire.StatusCancelled {
			t.Fatalf("task after a kept cancel = %+v, %v; want it going on", got, err)
		}
		if got.Status.IsTerminal() {
			t.Fatalf("the task ended (%s) before a poll reported progress", got.Status)
		}
		if !strings.HasPrefix(got.StatusMessage, worker.KeptCancelStatus) {
			t.Fatalf("status message %q; want it to begin with why the cancel was kept", got.StatusMessage)
		}
		return strings.Contains(got.StatusMessage, "the provider says: ")
	})
	op := awaitOperation(t, ctx, g.Store, opID, ended)
	if op.State != ledger.StateCompleted {
		t.Errorf("operation = %s, want completed: the policy keeps the job", op.State)
	}
	g.stop(t)
	if n := counter.count("run_suite"); n != 1 || counter.count("cancel_job") != 0 {
		t.Errorf("run_suite calls = %d, cancel_job calls = %d; want 1 and 0", n, counter.count("cancel_job"))
	}
}
