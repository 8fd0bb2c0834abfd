package claudecode

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/tcpproxy"
	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/sim/fixtures"
)

// The answer to Claude Code's call is lost on the way: Claude Code reaches
// the gateway through a TCP proxy; once the provider runs the job the
// proxy holds everything, the gateway writes the job's result into the
// held connection, and the proxy resets every connection before a byte of
// it reaches Claude Code. The model sees the call fail and calls again
// with the same operation ID; the retry attaches to the completed
// operation and gets the result. The provider runs one job, and the
// receipt shows both attempts, the first one answered as far as the
// gateway could tell.
func TestHeadlessCutAnswerRetryAttaches(t *testing.T) {
	testCut(t, "cc-cut-answer", cutAnswerInFlight)
}

// The same on 2025-11-25 (MCP_PROTOCOL_NEGOTIATION=legacy); the session
// outlives the reset connection.
func TestHeadlessLegacyCutAnswerRetryAttaches(t *testing.T) {
	testCut(t, "cc-cut-answer-legacy", cutAnswerInFlight, "MCP_PROTOCOL_NEGOTIATION=legacy")
}

// The connection is reset while the gateway still waits for the job: the
// gateway records that the client left, the job runs on, and the model's
// retry with the same operation ID attaches and gets the result. One job.
func TestHeadlessCutWhileWaitingRetryAttaches(t *testing.T) {
	testCut(t, "cc-cut-waiting", cutWhileWaiting)
}

// cutPhase is when the proxy resets the connection that carries the call.
type cutPhase int

const (
	// cutAnswerInFlight: after the gateway wrote the job's result.
	cutAnswerInFlight cutPhase = iota
	// cutWhileWaiting: while the gateway waits for the running job.
	cutWhileWaiting
)

func testCut(t *testing.T, opID string, phase cutPhase, env ...string) {
	needClaude(t)
	ctx := testCtx(t, 3*time.Minute)
	// The job outlasts the steps between its start and the stall by far;
	// the gateway's wait (20s) outlasts the job, so the first call is
	// answered with the result.
	s := newStage(t, ctx, 4*time.Second, fixtures.ConfigOptions{}, nil)
	gw, err := url.Parse(s.MCPURL())
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := tcpproxy.Start(gw.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	m := newModel(t, retryWhileFailing(runSuite, suiteInput(opID), 4))
	// Claude Code's own timeout stays far away: the only failure is the
	// reset connection.
	c := newClient(t, m, "taskgate", "http://"+proxy.Addr()+gw.Path,
		map[string]string{"Authorization": "Bearer " + s.key}, append([]string{"MCP_TOOL_TIMEOUT=120000"}, env...)...)
	done := c.headlessInBackground(t, ctx, "Run the settlement suite.", "mcp__taskgate")

	// The gateway has accepted the operation and sent the job.
	jobRunning(t, ctx, s.Sim)
	var firstResult ledger.ClientResult
	if phase == cutAnswerInFlight {
		// Hold the link, so that the answer the gateway writes goes no
		// further; reset it once the gateway has written the answer (it
		// records the attempt's client result when the response is
		// written).
		proxy.Stall()
		if n := len(m.Results()); n != 1 {
			t.Fatalf("the model has %d tool results before the stall; want only ToolSearch's", n)
		}
		firstResult = firstAnswered(t, ctx, s, opID)
		proxy.Cut()
		proxy.Restore()
	} else {
		// Let new connections through at once, so that the model's retry
		// reaches the gateway rather than a second reset.
		proxy.Cut()
		proxy.Restore()
		firstResult = firstAnswered(t, ctx, s, opID)
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("claude -p did not end")
	}

	results := m.Results()
	if len(results) < 3 {
		t.Fatalf("the model saw %d tool results; want ToolSearch's, the cut call's and the retry's", len(results))
	}
	if first := results[1]; first.Name != runSuite || !first.IsError || strings.Contains(first.Text, `"status":"succeeded"`) {
		t.Fatalf("the cut call answered %+v; want an error, not the job's result", first)
	}
	t.Logf("Claude Code told the model of the cut connection: %q", results[1].Text)
	if last := results[len(results)-1]; last.IsError || !strings.Contains(last.Text, `"status":"succeeded"`) {
		t.Fatalf("the retry answered %+v; want the job's result", last)
	}
	checkOneJob(t, ctx, s, m, opID)
	// A 2025-11-25 session outlives the reset connection: Claude Code
	// initializes once; 2026-07-28 has no initialize.
	wantSessions := 0
	if slices.Contains(env, "MCP_PROTOCOL_NEGOTIATION=legacy") {
		wantSessions = 1
	}
	if n := strings.Count(s.Output(), `msg="session initialized"`); n != wantSessions {
		t.Errorf("the gateway logged %d 2025-11-25 sessions initialized; want %d", n, wantSessions)
	}

	// The lineage as the gateway knows it: the first attempt created the
	// operation, every later one attached. An answer written into the held
	// connection counts as delivered: the gateway cannot see the bytes die
	// in the proxy.
	wantFirst := map[cutPhase]ledger.ClientResult{cutAnswerInFlight: ledger.ClientDelivered, cutWhileWaiting: ledger.ClientDisconnected}[phase]
	if firstResult != wantFirst {
		t.Errorf("the gateway recorded the cut call's client result %s; want %s", firstResult, wantFirst)
	}
	r := s.receipt(t, ctx, opID)
	for i, a := range r.Lineage {
		t.Logf("lineage %d: decision %s, client result %s, remote accepted %s, charge %s", i, a.Decision, a.ClientResult, a.RemoteAccepted, a.ChargeStatus)
		want := ledger.DecisionAttached
		if i == 0 {
			want = ledger.DecisionCreated
		}
		if a.Decision != string(want) || a.OperationID != opID {
			t.Errorf("lineage %d: decision %s for %q; want %s for %q", i, a.Decision, a.OperationID, want, opID)
		}
		wantResult := ledger.ClientDelivered
		if i == 0 {
			wantResult = wantFirst
		}
		if a.ClientResult != string(wantResult) {
			t.Errorf("lineage %d: client result %s; want %s", i, a.ClientResult, wantResult)
		}
	}
}

// firstAnswered waits until the gateway has recorded what became of the
// answer to the operation's first attempt, and returns it.
func firstAnswered(t *testing.T, ctx context.Context, s *stage, opID string) ledger.ClientResult {
	t.Helper()
	var result ledger.ClientResult
	testwait.Until(t, ctx, "the gateway to answer the first call", func() (bool, error) {
		op, err := s.Store.OperationGet(ctx, &ledger.OperationGetParams{Tenant: Tenant, OperationID: opID})
		if err != nil {
			return false, err
		}
		attempts, err := s.Store.AttemptList(ctx, op.ID)
		if err != nil {
			return false, err
		}
		if len(attempts) == 0 || attempts[0].ClientResult == ledger.ClientUnknown || attempts[0].ClientResult == "" {
			return false, fmt.Errorf("operation %s is %s, its first attempt not answered yet", opID, op.State)
		}
		result = attempts[0].ClientResult
		return true, nil
	})
	return result
}
