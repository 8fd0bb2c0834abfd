package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/pgtest"
	"github.com/taskgate/taskgate/internal/syncbuf"
	"github.com/taskgate/taskgate/internal/tcpproxy"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/dburl"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
)

// outage is the least time the test keeps the ledger away.
const outage = 8 * time.Second

// promptly bounds how long a consequential call may take to be refused
// while the ledger is unreachable: a client must hear ledger_unavailable,
// not wait on a hung connection.
const promptly = 8 * time.Second

// TestDatabaseOutage puts a TCP proxy between one gateway and its
// PostgreSQL ledger and takes the ledger away while operations are
// accepted, dispatched and followed: cut (connections reset, as when the
// database host is gone) or stalled (connections hang, as on a network
// that drops everything). Meanwhile a consequential call is refused
// promptly with ledger_unavailable and starts nothing, a pass-through tool
// still works and /readyz says the ledger is unavailable. When the proxy is
// restored, without restarting anything, every operation accepted before
// the outage ends, and the provider's own record holds exactly one job per
// operation.
func TestDatabaseOutage(t *testing.T) {
	t.Run("cut", func(t *testing.T) { testDatabaseOutage(t, (*tcpproxy.Proxy).Cut) })
	t.Run("stalled", func(t *testing.T) { testDatabaseOutage(t, (*tcpproxy.Proxy).Stall) })
}

func testDatabaseOutage(t *testing.T, takeAway func(*tcpproxy.Proxy)) {
	direct, ledgerURL, proxy := pgtest.SchemaBehindProxy(t)
	ctx := testCtx(t, 150*time.Second)

	logs := &syncbuf.Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs.String())
		}
	})
	h := newHarness(t, &fixtures.Options{
		DB: ledgerURL,
		// A statement that timed out in a stall may still commit when the
		// network heals (its bytes were on their way): a worker can then
		// find "send started" for a send it never made. The provider's
		// contract says when not_found is safe to re-send; without it
		// such an operation rightly waits for a human instead.
		Config: fixtures.ConfigOptions{NotFoundSafeAfter: new(time.Second)},
		Sim:    providersim.Options{JobDuration: 1500 * time.Millisecond},
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	// The test reads the ledger around the proxy.
	store, err := dburl.Open(ctx, direct, nil)
	if err != nil {
		t.Fatalf("open the ledger directly: %v", err)
	}
	t.Cleanup(func() { store.Close() })
	base := strings.TrimSuffix(h.MCPURL(), "/mcp")
	cs := connect(t, ctx, h, fixtures.EraExtension)

	// One operation is running at the provider when the cut comes; a
	// burst more were accepted just before it, their dispatch anywhere
	// between queued and sent.
	ops := []string{"op-outage-running"}
	startTask(t, ctx, cs, ops[0])
	waitFor(t, ctx, "the first operation's job has started at the provider", func() bool { return len(h.Sim.Jobs()) == 1 })
	for i := range 3 {
		ops = append(ops, fmt.Sprintf("op-outage-queued-%d", i))
		startTask(t, ctx, cs, ops[len(ops)-1])
	}
	for _, op := range ops {
		logHistory(t, store, op)
	}
	takeAway(proxy)
	awayAt := time.Now()

	// Early in the outage and again late in it: a consequential call is
	// refused at once and starts nothing, a pass-through tool works, and
	// /readyz says the ledger is unavailable.
	const during = "op-outage-during"
	checkOutage(t, ctx, cs, base, during)
	// The outage lasts until every job the provider has has ended, so
	// that the gateway learns of their ends only after the ledger is
	// back, and at least outage long, so that the worker's jobs fail
	// and cached credentials go stale meanwhile.
	waitFor(t, ctx, "the provider's jobs have ended", func() bool {
		for _, j := range h.Sim.Jobs() {
			if !j.Status.Terminal() {
				return false
			}
		}
		return true
	})
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(time.Until(awayAt.Add(outage))):
	}
	checkOutage(t, ctx, cs, base, during)
	proxy.Restore()

	waitFor(t, ctx, "/readyz answers 200 after the ledger is back", func() bool {
		code, _ := readyz(t, ctx, base)
		return code == http.StatusOK
	})
	// The refused call, retried, is accepted now.
	startTask(t, ctx, cs, during)
	ops = append(ops, during)
	logHistory(t, store, during)

	byKey := map[string]providersim.Job{}
	for _, opID := range ops {
		op := awaitOperation(t, ctx, store, opID, endedOrReview)
		if op.State != ledger.StateCompleted {
			t.Errorf("operation %s ended %s (%s, review reason %q); want completed", opID, op.State, op.StatusMessage, op.ReviewReason)
			continue
		}
		var res mcp.CallToolResult
		if err := json.Unmarshal(op.Result, &res); err != nil {
			t.Fatalf("stored result of %s %s: %v", opID, op.Result, err)
		}
		byKey[op.ProviderKey()] = providersim.Job{ID: fixtures.ResultJob(&res)}
	}
	jobs := h.Sim.Jobs()
	if len(jobs) != len(ops) {
		t.Errorf("provider jobs = %d, want %d (one per operation): %+v", len(jobs), len(ops), jobs)
	}
	for _, j := range jobs {
		want, ok := byKey[j.IdempotencyKey]
		switch {
		case !ok:
			t.Errorf("provider job %s (key %q) belongs to no operation", j.ID, j.IdempotencyKey)
		case want.ID != j.ID:
			t.Errorf("provider job %s has the key of the operation whose result names job %s", j.ID, want.ID)
		}
	}
}

// checkOutage checks what a client sees while the ledger is away: a
// consequential call as opID is refused promptly with ledger_unavailable, a
// pass-through tool works, and /readyz names the ledger unavailable.
func checkOutage(t *testing.T, ctx context.Context, cs *mcp.ClientSession, base, opID string) {
	t.Helper()
	start := time.Now()
	callCtx, cancel := context.WithTimeout(ctx, 3*promptly)
	_, err := cs.CallTool(callCtx, fixtures.RunSuiteCall(opID, nil))
	cancel()
	took := time.Since(start)
	if code, reason, _ := fixtures.ErrorReason(err); code != jsonrpc.CodeInternalError || reason != "ledger_unavailable" {
		t.Fatalf("run_suite while the ledger is away = %v (code %d, reason %q) after %s; want -32603 ledger_unavailable", err, code, reason, took)
	}
	t.Logf("run_suite refused with ledger_unavailable after %s", took)
	if took > promptly {
		t.Errorf("run_suite while the ledger is away was refused after %s; want within %s", took, promptly)
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "hosted_test.estimate_suite", Arguments: map[string]any{"suite": "settlement"}})
	if err != nil || res.IsError {
		t.Fatalf("estimate_suite while the ledger is away = %s, %v; want the estimate", fixtures.ResultText(res), err)
	}

	if code, body := readyz(t, ctx, base); code != http.StatusServiceUnavailable || !strings.Contains(body, `"ledger":"unavailable"`) {
		t.Errorf("/readyz while the ledger is away = %d %s; want 503 naming the ledger unavailable", code, body)
	}
}

// readyz fetches /readyz within a bounded time.
func readyz(t *testing.T, ctx context.Context, base string) (int, string) {
	t.Helper()
	rctx, cancel := context.WithTimeout(ctx, promptly)
	defer cancel()
	code, body, err := fixtures.Readiness(rctx, base)
	if err != nil {
		t.Fatal(err)
	}
	return code, body
}
