package worker_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/pgtest"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
	"github.com/taskgate/taskgate/taskwire"
)

const concurrentAttempts = 64

// keyIgnoringProvider starts a job for every run_suite call, whatever its
// idempotency key: its count of jobs is the count of sends that reached it.
func keyIgnoringProvider() providersim.Options {
	return providersim.Options{Faults: providersim.Faults{IgnoreIdempotencyKey: true}}
}

// burstOfAttempts lets one tenant's concurrentAttempts calls in at once:
// what is tested is that they make one operation, not the call rate.
func burstOfAttempts(y string) string {
	return y + fmt.Sprintf("limits: {call_burst: %d}\n", concurrentAttempts)
}

// TestConcurrentAttemptsPostgres: 64 attempts with one operation ID, half
// through each of two gateway processes sharing one PostgreSQL ledger.
func TestConcurrentAttemptsPostgres(t *testing.T) {
	db := pgtest.Schema(t)
	ctx := testCtx(t, 120*time.Second)
	h := newHarness(t, &fixtures.Options{DB: db, Process: []string{gatewayBinary}, Sim: keyIgnoringProvider(), EditConfig: burstOfAttempts})
	replica := startReplica(t, ctx, h, "the second gateway")
	runConcurrentAttempts(t, ctx, h, []string{h.MCPURL(), replica.MCPURL()}, func() error {
		return errors.Join(replica.Stop(ctx), h.Stop(ctx))
	})
}

// TestConcurrentAttemptsSQLite: 64 attempts with one operation ID through
// one gateway on the embedded ledger.
func TestConcurrentAttemptsSQLite(t *testing.T) {
	ctx := testCtx(t, 120*time.Second)
	h := newHarness(t, &fixtures.Options{Sim: keyIgnoringProvider(), EditConfig: burstOfAttempts})
	runConcurrentAttempts(t, ctx, h, []string{h.MCPURL()}, func() error { return h.Stop(ctx) })
}

// answer is what one concurrent client got.
type answer struct {
	task *taskwire.Task
	res  *mcp.CallToolResult
	err  error
}

// runConcurrentAttempts connects 64 real MCP clients spread over the
// gateways at urls, releases their calls together, and checks that exactly
// one operation and one provider job came of them. stop stops every
// gateway gracefully, so that nothing can reach the provider afterwards.
func runConcurrentAttempts(t *testing.T, ctx context.Context, h *fixtures.Harness, urls []string, stop func() error) {
	t.Helper()
	const opID = "op-concurrent"
	logHistory(t, h.Store, opID)
	key, err := h.Key(ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	// The clients take turns in the eras: both task eras get the task
	// handle at once, a plain client waits for the result.
	turns := []fixtures.Era{fixtures.EraExtension, fixtures.EraLegacy, fixtures.EraPlain}
	sessions := make([]*mcp.ClientSession, concurrentAttempts)
	eras := make([]fixtures.Era, concurrentAttempts)
	for i := range sessions {
		eras[i] = turns[i%len(turns)]
		cs, err := fixtures.Dial(ctx, urls[i%len(urls)], key, eras[i], nil)
		if err != nil {
			t.Fatalf("connect client %d (%s) to %s: %v", i, eras[i], urls[i%len(urls)], err)
		}
		t.Cleanup(func() { cs.Close() })
		sessions[i] = cs
	}

	start := make(chan struct{})
	answers := make([]answer, concurrentAttempts)
	var wg sync.WaitGroup
	for i, cs := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			a := &answers[i]
			if eras[i] == fixtures.EraPlain {
				a.res, a.err = cs.CallTool(ctx, fixtures.RunSuiteCall(opID, nil))
				return
			}
			a.task, a.res, a.err = taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall(opID, nil), nil)
		}()
	}
	close(start)
	wg.Wait()

	op := awaitOperation(t, ctx, h.Store, opID, ended)
	for _, cs := range sessions {
		cs.Close()
	}
	closeIdleClients()
	if err := stop(); err != nil {
		t.Fatalf("stop the gateways: %v", err)
	}
	jobs := h.Sim.Jobs()
	if len(jobs) != 1 {
		t.Fatalf("provider jobs = %d (%+v), want 1", len(jobs), jobs)
	}
	if op.State != ledger.StateCompleted {
		t.Fatalf("operation ended %s (%s), want completed", op.State, op.StatusMessage)
	}
	for i, a := range answers {
		switch {
		case a.err != nil:
			t.Errorf("client %d (%s): %v", i, eras[i], a.err)
		case eras[i] == fixtures.EraPlain:
			if a.res.IsError || fixtures.ResultJob(a.res) != jobs[0].ID {
				t.Errorf("client %d (%s) got %+v, want the result of %s", i, eras[i], a.res, jobs[0].ID)
			}
		case a.task == nil:
			t.Errorf("client %d (%s) got a direct result %+v, want a task", i, eras[i], a.res)
		case a.task.ID != op.TaskID:
			t.Errorf("client %d (%s) got task %s, want %s", i, eras[i], a.task.ID, op.TaskID)
		}
	}

	ops, err := h.Store.OperationList(ctx, &ledger.OperationListParams{OperationID: opID})
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 1 {
		t.Errorf("operations with ID %s = %d, want 1", opID, len(ops))
	}
	atts, err := h.Store.AttemptList(ctx, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	decisions := map[ledger.Decision]int{}
	requests := map[string]bool{}
	for _, a := range atts {
		decisions[a.Decision]++
		requests[a.RequestID] = true
	}
	want := map[ledger.Decision]int{ledger.DecisionCreated: 1, ledger.DecisionAttached: concurrentAttempts - 1}
	if len(atts) != concurrentAttempts || fmt.Sprint(decisions) != fmt.Sprint(want) || len(requests) != concurrentAttempts {
		t.Errorf("attempts = %d with decisions %v and %d request IDs, want %d with %v and as many request IDs",
			len(atts), decisions, len(requests), concurrentAttempts, want)
	}
	if op.SendCount != 1 {
		t.Errorf("send count = %d, want 1", op.SendCount)
	}
}
