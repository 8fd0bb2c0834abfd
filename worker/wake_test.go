package worker_test

import (
	"testing"
	"time"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
)

// TestEnqueuedJobsWakeTheWorker: a job the gateway enqueues is fetched at
// once, not at the worker's next fetch poll (River's notifications, which
// it keeps in a table on SQLite): with a fetch poll of an hour, a call is
// still sent, followed and completed within seconds, so a long default
// fetch poll costs no dispatch latency.
func TestEnqueuedJobsWakeTheWorker(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	h := newHarness(t, &fixtures.Options{
		Config: fixtures.ConfigOptions{FetchPoll: time.Hour},
		Sim:    providersim.Options{JobDuration: 300 * time.Millisecond},
	})
	cs := connect(t, ctx, h, fixtures.EraExtension)
	start := time.Now()
	startTask(t, ctx, cs, "op-woken")
	op := awaitOperation(t, ctx, h.Store, "op-woken", func(op *ledger.Operation) bool { return op.State.Terminal() })
	if op.State != ledger.StateCompleted || op.SendCount != 1 {
		t.Fatalf("operation %s after %d sends, want completed after 1", op.State, op.SendCount)
	}
	t.Logf("completed %s after the call", time.Since(start).Round(time.Millisecond))
}
