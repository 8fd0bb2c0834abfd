package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/crashpoint"
	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
)

// crashHarness runs the gateway as a real child process that stops at
// point, so that the test can SIGKILL it exactly there. The provider
// ignores idempotency keys: every call that reaches it starts a job of its
// own, so its count of jobs is the count of sends that reached it.
func crashHarness(t *testing.T, point string, cfg fixtures.ConfigOptions, sim providersim.Options) *fixtures.Harness {
	t.Helper()
	cfg.Lease = 1 * time.Second
	sim.Faults.IgnoreIdempotencyKey = true
	return newHarness(t, &fixtures.Options{
		Process: []string{gatewayBinary},
		Env:     []string{"TASKGATE_CRASHPOINT=" + point},
		Config:  cfg,
		Sim:     sim,
	})
}

// killAtAndRestart waits for the gateway to stop at point, kills it with
// SIGKILL and starts it again without a crash point.
func killAtAndRestart(t *testing.T, ctx context.Context, h *fixtures.Harness, point string) {
	t.Helper()
	if err := h.WaitOutput(ctx, "CRASHPOINT "+point); err != nil {
		t.Fatal(err)
	}
	if err := h.Kill(); err != nil {
		t.Fatalf("kill the gateway: %v", err)
	}
	h.SetEnv()
	if err := h.Start(ctx); err != nil {
		t.Fatalf("restart the gateway: %v", err)
	}
}

// crashAndRecover makes the consequential call as opID from a tasks client
// of a gateway that dies at point (see crashHarness), restarts the gateway
// there, and waits until the operation ends or needs review.
func crashAndRecover(t *testing.T, ctx context.Context, point string, cfg fixtures.ConfigOptions, sim providersim.Options, opID string) (*fixtures.Harness, *ledger.Operation) {
	t.Helper()
	h := crashHarness(t, point, cfg, sim)
	cs := connect(t, ctx, h, fixtures.EraExtension)
	startTask(t, ctx, cs, opID)
	logHistory(t, h.Store, opID)
	killAtAndRestart(t, ctx, h, point)
	return h, awaitOperation(t, ctx, h.Store, opID, endedOrReview)
}

// assertOneJob checks the provider's own record: exactly one job, and the
// operation's result names it.
func assertOneJob(t *testing.T, h *fixtures.Harness, op *ledger.Operation) {
	t.Helper()
	jobs := h.Sim.Jobs()
	if len(jobs) != 1 {
		t.Fatalf("provider jobs = %d (%+v), want 1", len(jobs), jobs)
	}
	if jobs[0].IdempotencyKey != op.ProviderKey() {
		t.Errorf("provider job key = %q, want the operation's provider key %q", jobs[0].IdempotencyKey, op.ProviderKey())
	}
	if op.State != ledger.StateCompleted {
		t.Fatalf("operation %s ended %s (%s), want completed", op.OperationID, op.State, op.StatusMessage)
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(op.Result, &res); err != nil {
		t.Fatalf("stored result %s: %v", op.Result, err)
	}
	if got := fixtures.ResultJob(&res); got != jobs[0].ID {
		t.Errorf("stored result names job %q, want %q", got, jobs[0].ID)
	}
}

// The gateway dies right after committing an acceptance, before it
// answers: the client's call is lost, and its retry attaches.
func TestCrashAfterAcceptCommit(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	h := crashHarness(t, crashpoint.AfterAcceptCommit, fixtures.ConfigOptions{}, providersim.Options{})
	cs := connect(t, ctx, h, fixtures.EraPlain)
	logHistory(t, h.Store, "op-accept-commit")

	// The first call is in flight when the gateway dies: its answer was
	// never written. It gets its own bound so that the test never waits on
	// it longer than that.
	callCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	first := make(chan error, 1)
	go func() {
		res, err := cs.CallTool(callCtx, fixtures.RunSuiteCall("op-accept-commit", nil))
		if err == nil {
			err = errors.New("got an answer: " + fixtures.ResultJob(res))
		}
		first <- err
	}()
	killAtAndRestart(t, ctx, h, crashpoint.AfterAcceptCommit)
	if err := <-first; callCtx.Err() != nil || err == nil {
		t.Fatalf("the in-flight call ended with %v (call context: %v); want a broken connection", err, callCtx.Err())
	}

	retry := connect(t, ctx, h, fixtures.EraPlain)
	res, err := retry.CallTool(ctx, fixtures.RunSuiteCall("op-accept-commit", nil))
	if err != nil || res.IsError {
		t.Fatalf("retry after the restart = %+v, %v; want the result", res, err)
	}
	op := awaitOperation(t, ctx, h.Store, "op-accept-commit", ended)
	assertOneJob(t, h, op)
	if got, want := fixtures.ResultJob(res), h.Sim.Jobs()[0].ID; got != want {
		t.Errorf("retry got job %q, want %q", got, want)
	}
	// The attempt in flight at the crash was never answered, and nothing
	// can say whether its client saw anything: its client result stays
	// unknown. The retry's is recorded once its response is written.
	var got []string
	testwait.Until(t, ctx, "the retry's client result to be recorded", func() (bool, error) {
		atts, err := h.Store.AttemptList(ctx, op.ID)
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, a := range atts {
			got = append(got, string(a.Decision)+"/"+string(a.ClientResult))
		}
		return len(atts) != 2 || atts[1].ClientResult != ledger.ClientUnknown, fmt.Errorf("attempts (decision/client result) are %v", got)
	})
	if want := []string{"created/unknown", "attached/delivered"}; !slices.Equal(got, want) {
		t.Errorf("attempts (decision/client result) = %v, want %v", got, want)
	}
}

// The gateway dies after committing "send started", before the call left:
// the provider has nothing, and the recovery's lookup says not_found.
func TestCrashAfterSendStarted(t *testing.T) {
	t.Run("not_found safe after 0s: re-sent once", func(t *testing.T) {
		ctx := testCtx(t, 60*time.Second)
		h, op := crashAndRecover(t, ctx, crashpoint.AfterSendStarted, fixtures.ConfigOptions{NotFoundSafeAfter: new(time.Duration(0))}, providersim.Options{}, "op-send-safe")
		assertOneJob(t, h, op)
		if got, want := lookups(t, ctx, h.Store, op), [][2]string{{"not_found", "resend"}}; !slices.Equal(got, want) {
			t.Errorf("lookups (answer, action) = %v, want %v", got, want)
		}
		if op.SendCount != 2 {
			t.Errorf("send count = %d, want 2 (the lost send and one re-send)", op.SendCount)
		}
	})
	t.Run("not_found without a safe delay: review, nothing re-sent", func(t *testing.T) {
		ctx := testCtx(t, 60*time.Second)
		h, op := crashAndRecover(t, ctx, crashpoint.AfterSendStarted, fixtures.ConfigOptions{}, providersim.Options{}, "op-send-unsafe")
		if op.State != ledger.StateReview || op.ReviewReason != ledger.ReasonLookupNotFoundUnsafe {
			t.Fatalf("operation is %s (review reason %q), want review with %q", op.State, op.ReviewReason, ledger.ReasonLookupNotFoundUnsafe)
		}
		if got, want := lookups(t, ctx, h.Store, op), [][2]string{{"not_found", "require_review"}}; !slices.Equal(got, want) {
			t.Errorf("lookups (answer, action) = %v, want %v", got, want)
		}
		// A graceful stop waits for whatever the gateway was still doing:
		// after it, nothing can reach the provider any more.
		closeIdleClients()
		if err := h.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if jobs := h.Sim.Jobs(); len(jobs) != 0 {
			t.Errorf("provider jobs = %+v, want none", jobs)
		}
		if op.SendCount != 1 {
			t.Errorf("send count = %d, want 1", op.SendCount)
		}
	})
}

// The gateway dies after the provider accepted the call, before the remote
// job was bound: the recovery finds the job by lookup and never re-sends.
func TestCrashAfterUpstreamAccept(t *testing.T) {
	tests := []struct {
		name  string
		tasks string
		job   time.Duration
		want  [2]string // the recovery's lookup (answer, action)
	}{
		// The upstream answered with a task at once; the job still runs
		// when the new process looks it up.
		{name: "task still running", tasks: "auto", job: 4 * time.Second, want: [2]string{"running", "attach_to_existing_job"}},
		// A plain call returns when the job has ended; the result the
		// crashed process held is fetched again.
		{name: "plain call, job ended", tasks: "off", job: 400 * time.Millisecond, want: [2]string{"completed", "fetch_result"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t, 60*time.Second)
			h, op := crashAndRecover(t, ctx, crashpoint.AfterUpstreamAccept, fixtures.ConfigOptions{Tasks: tt.tasks}, providersim.Options{JobDuration: tt.job}, "op-upstream-accept")
			assertOneJob(t, h, op)
			if got := lookups(t, ctx, h.Store, op); !slices.Equal(got, [][2]string{tt.want}) {
				t.Errorf("lookups (answer, action) = %v, want [%v]", got, tt.want)
			}
			if op.SendCount != 1 {
				t.Errorf("send count = %d, want 1", op.SendCount)
			}
		})
	}
}

// The gateway dies while following a bound remote job: the recovery goes
// on following it.
func TestCrashWhilePolling(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	h, op := crashAndRecover(t, ctx, crashpoint.WhilePolling, fixtures.ConfigOptions{}, providersim.Options{JobDuration: 2 * time.Second}, "op-polling")
	assertOneJob(t, h, op)
	if got := lookups(t, ctx, h.Store, op); len(got) != 0 {
		t.Errorf("lookups = %v, want none: the job was bound, so recovery resumes polling", got)
	}
	recovered := events(t, ctx, h.Store, op, ledger.EventRecovered)
	if len(recovered) == 0 || recovered[0]["state"] != string(ledger.StateRunning) {
		t.Errorf("recovered events = %v, want one for the running operation", recovered)
	}
	if op.SendCount != 1 {
		t.Errorf("send count = %d, want 1", op.SendCount)
	}
}
