package mcpserver_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/taskwire"
)

// A 2026-07-28 client without tasks that declares elicitation (the go-sdk's
// default client with an elicitation handler) waits for a consequential
// call's result; the upstream's question reaches it in that result, an
// input_required result, and its next call carries the answer.

// askingDefaultClient opens a session of the go-sdk's default client to
// g. With answer set, its user gives that answer to every elicitation,
// which it then declares, and asked records the questions; with manual,
// the go-sdk's own answering is off, so that the test makes each round.
func askingDefaultClient(t *testing.T, g *inputGateway, answer *mcp.ElicitResult, asked *[]*mcp.ElicitParams, manual bool) *mcp.ClientSession {
	t.Helper()
	opts := &mcp.ClientOptions{}
	if answer != nil {
		var mu sync.Mutex
		opts.ElicitationHandler = func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			defer mu.Unlock()
			*asked = append(*asked, req.Params)
			return answer, nil
		}
	}
	if manual {
		opts.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
	}
	return defaultClient(t, g.url, g.key, opts)
}

var (
	acceptConfirm  = &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}
	declineConfirm = &mcp.ElicitResult{Action: "decline"}
)

// TestDefaultClientIsAskedInTheResult: the question of an upstream that
// answers with input_required, or of a 2025-11-25 upstream that elicits
// within the call, reaches the default client in its call's result; the
// go-sdk answers it and calls again, and the call's result is the
// operation's. A decline ends the operation with nothing started.
func TestDefaultClientIsAskedInTheResult(t *testing.T) {
	type upstream struct {
		url  string
		jobs func() int
	}
	upstreams := map[string]func(t *testing.T) upstream{
		"input_required": func(t *testing.T) upstream {
			up, url := newConfirmUpstream(t)
			return upstream{url, func() int { n, _, _, _ := up.counts(); return n }}
		},
		"elicitation within the call": func(t *testing.T) upstream {
			up, url := newElicitingUpstream(t)
			return upstream{url, func() int { n, _ := up.seen(); return n }}
		},
	}
	for _, tt := range []struct {
		upstream string
		answer   *mcp.ElicitResult
		text     string
		state    ledger.State
		jobs     int
		question receipt.QuestionAnswer
	}{
		{"input_required", acceptConfirm, "deleted report.txt", ledger.StateCompleted, 1, receipt.QuestionAnswered},
		{"input_required", declineConfirm, `Operation "op-default" was cancelled.`, ledger.StateCancelled, 0, receipt.QuestionDeclined},
		{"elicitation within the call", acceptConfirm, "deleted report.txt", ledger.StateCompleted, 1, receipt.QuestionAnswered},
		{"elicitation within the call", declineConfirm, `Operation "op-default" was cancelled.`, ledger.StateCancelled, 0, receipt.QuestionDeclined},
	} {
		t.Run(tt.upstream+" "+tt.answer.Action, func(t *testing.T) {
			up := upstreams[tt.upstream](t)
			g := startInputGateway(t, up.url, "sqlite:"+filepath.Join(t.TempDir(), "taskgate.db"), nil)
			var asked []*mcp.ElicitParams
			cs := askingDefaultClient(t, g, tt.answer, &asked, false)
			res, err := cs.CallTool(testCtx(t), deleteCall("op-default"))
			if err != nil {
				t.Fatal(err)
			}
			if got := fixtures.ResultText(res); got != tt.text {
				t.Fatalf("result = %q; want %q", got, tt.text)
			}
			if len(asked) != 1 || !strings.HasPrefix(asked[0].Message, "Delete report.txt") {
				t.Fatalf("the client was asked %+v; want the upstream's question once", asked)
			}
			if n := up.jobs(); n != tt.jobs {
				t.Fatalf("the provider started %d jobs; want %d", n, tt.jobs)
			}
			op := operationOf(t, g.store, "op-default")
			if op.State != tt.state || op.InputChannel != ledger.InputChannelCallResult {
				t.Fatalf("operation %s, input channel %q; want %s, %q", op.State, op.InputChannel, tt.state, ledger.InputChannelCallResult)
			}
			testwait.Until(t, testCtx(t), "the receipt to list the question", func() (bool, error) {
				r := receiptOf(t, g.store, "op-default")
				return r.ObservedRemoteJobs == tt.jobs && len(r.Questions) == 1 && r.Questions[0].Answer == tt.question,
					fmt.Errorf("receipt: %d remote jobs, questions %+v", r.ObservedRemoteJobs, r.Questions)
			})
		})
	}
}

// TestDefaultClientIsAskedEveryRound: an upstream that asks again after
// the first answer is answered in a second round, the same way.
func TestDefaultClientIsAskedEveryRound(t *testing.T) {
	up, upURL := newConfirmUpstream(t)
	up.askTwice = true
	g := startInputGateway(t, upURL, "sqlite:"+filepath.Join(t.TempDir(), "taskgate.db"), nil)
	var asked []*mcp.ElicitParams
	res, err := askingDefaultClient(t, g, acceptConfirm, &asked, false).CallTool(testCtx(t), deleteCall("op-twice"))
	if err != nil || fixtures.ResultText(res) != "deleted report.txt" {
		t.Fatalf("result = %q, %v; want deleted report.txt", fixtures.ResultText(res), err)
	}
	if len(asked) != 2 || asked[1].Message != "Really delete report.txt?" {
		t.Fatalf("the client was asked %+v; want both questions", asked)
	}
	if jobs, q, a, bad := up.counts(); jobs != 1 || q != 1 || a != 2 || bad != 0 {
		t.Fatalf("upstream saw %d jobs, %d questions, %d answers, %d bad states; want 1, 1, 2, 0", jobs, q, a, bad)
	}
}

// TestDefaultClientWithoutElicitation: a default client that declares no
// elicitation cannot be asked, so the operation waits for a human, as
// before.
func TestDefaultClientWithoutElicitation(t *testing.T) {
	up, upURL := newConfirmUpstream(t)
	g := startInputGateway(t, upURL, "sqlite:"+filepath.Join(t.TempDir(), "taskgate.db"), func(y string) string {
		return strings.Replace(y, "wait: 20s", "wait: 300ms", 1)
	})
	if _, err := askingDefaultClient(t, g, nil, nil, false).CallTool(testCtx(t), deleteCall("op-no-elicitation")); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, testCtx(t), "the operation to wait for review", func() (bool, error) {
		op := operationOf(t, g.store, "op-no-elicitation")
		return op.State == ledger.StateReview && op.ReviewReason == ledger.ReasonUpstreamInputRequired, fmt.Errorf("state %s (%s)", op.State, op.ReviewReason)
	})
	if jobs, _, answered, _ := up.counts(); jobs != 0 || answered != 0 {
		t.Fatalf("upstream saw %d jobs, %d answers; want none", jobs, answered)
	}
}

// questionRound makes one round by hand: the call, with the answers of
// the round before (none on the first), and its result.
func questionRound(t *testing.T, cs *mcp.ClientSession, call *mcp.CallToolParams, before *mcp.CallToolResult) *mcp.CallToolResult {
	t.Helper()
	p := *call
	if before != nil {
		p.InputResponses = mcp.InputResponseMap{}
		for k := range before.InputRequests {
			p.InputResponses[k] = acceptConfirm
		}
		p.RequestState = before.RequestState
	}
	res, err := cs.CallTool(testCtx(t), &p)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestQuestionInTheResultSurvivesRestart: the question lives in the
// ledger, so a gateway restarted between the rounds takes the answer and
// the operation completes with one provider job.
func TestQuestionInTheResultSurvivesRestart(t *testing.T) {
	up, upURL := newConfirmUpstream(t)
	db := "sqlite:" + filepath.Join(t.TempDir(), "taskgate.db")
	g := startInputGateway(t, upURL, db, nil)
	var asked []*mcp.ElicitParams
	first := questionRound(t, askingDefaultClient(t, g, acceptConfirm, &asked, true), deleteCall("op-round-restart"), nil)
	if len(first.InputRequests) != 1 || !strings.HasPrefix(first.RequestState, "taskgate-question.") {
		t.Fatalf("first round = %+v; want one question and taskgate's requestState", first)
	}
	g.stop()

	again := startInputGateway(t, upURL, db, nil)
	res := questionRound(t, askingDefaultClient(t, again, acceptConfirm, &asked, true), deleteCall("op-round-restart"), first)
	if fixtures.ResultText(res) != "deleted report.txt" {
		t.Fatalf("second round after the restart = %q (%+v); want deleted report.txt", fixtures.ResultText(res), res)
	}
	up.checkAnsweredOnce(t)
}

// TestQuestionInTheResultContinuesADerivedOperation: a call whose
// operation ID is derived from its arguments within a window continues the
// operation that asked, named by its requestState, also when it comes
// after that window: one operation, one provider job.
func TestQuestionInTheResultContinuesADerivedOperation(t *testing.T) {
	up, upURL := newConfirmUpstream(t)
	g := startInputGateway(t, upURL, "sqlite:"+filepath.Join(t.TempDir(), "taskgate.db"), func(y string) string {
		return strings.Replace(y, "        retry_policy: lookup_then_attach\n", "        retry_policy: lookup_then_attach\n        derive_operation_id: 1s\n", 1)
	})
	call := &mcp.CallToolParams{Name: "files.confirm_delete", Arguments: map[string]any{"filename": "report.txt", "token": "tok-s3cr3t"}}
	var asked []*mcp.ElicitParams
	cs := askingDefaultClient(t, g, acceptConfirm, &asked, true)
	window := time.Now().Truncate(time.Second)
	first := questionRound(t, cs, call, nil)
	if len(first.InputRequests) != 1 {
		t.Fatalf("first round = %+v; want a question", first)
	}
	testwait.Until(t, testCtx(t), "the derivation window to pass", func() (bool, error) {
		return time.Now().Truncate(time.Second).After(window), errors.New("still in the first window")
	})
	if res := questionRound(t, cs, call, first); fixtures.ResultText(res) != "deleted report.txt" {
		t.Fatalf("second round = %q (%+v); want deleted report.txt", fixtures.ResultText(res), res)
	}
	ops, err := g.store.OperationList(testCtx(t), &ledger.OperationListParams{Tenant: "acme"})
	if err != nil || len(ops) != 1 || ops[0].State != ledger.StateCompleted {
		t.Fatalf("operations = %d, %v; want the one that asked, completed", len(ops), err)
	}
	up.checkAnsweredOnce(t)
}

// taskAskingClient opens a 2026-07-28 session that takes tasks and, with
// elicitation, declares it; the go-sdk's own answering is off, so that
// the test makes each round.
func taskAskingClient(t *testing.T, g *inputGateway, elicitation bool) *mcp.ClientSession {
	t.Helper()
	caps := &mcp.ClientCapabilities{}
	if elicitation {
		caps.Elicitation = &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "task-asking"}, &mcp.ClientOptions{
		Capabilities:   taskwire.ClientCapabilitiesWithTasks(caps),
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	if err := taskwire.InstallClient(client); err != nil {
		t.Fatal(err)
	}
	transport := taskwire.WrapClientTransport(&mcp.StreamableClientTransport{
		Endpoint: g.url, MaxRetries: -1, HTTPClient: &http.Client{Transport: fixtures.Bearer{Key: g.key}},
	})
	cs, err := client.Connect(testCtx(t), transport, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// withInputBeforeTask sets files.confirm_delete's input_before_task.
func withInputBeforeTask(y string) string {
	return strings.Replace(y, "        retry_policy: lookup_then_attach\n", "        retry_policy: lookup_then_attach\n        input_before_task: 10s\n", 1)
}

// TestFirstQuestionBeforeTheTask: with input_before_task, a client that
// takes tasks and declares elicitation gets the upstream's first question
// in its call's result, with no task; the call with the answer gets the
// task, which completes with one provider job. A client that declares no
// elicitation gets its task at once, the question in it.
func TestFirstQuestionBeforeTheTask(t *testing.T) {
	t.Run("declares elicitation", func(t *testing.T) {
		up, upURL := newConfirmUpstream(t)
		g := startInputGateway(t, upURL, "sqlite:"+filepath.Join(t.TempDir(), "taskgate.db"), withInputBeforeTask)
		cs := taskAskingClient(t, g, true)
		ctx := testCtx(t)
		task, first, err := taskwire.CallToolAsTask(ctx, cs, deleteCall("op-before-task"), nil)
		if err != nil || task != nil || first == nil || len(first.InputRequests) != 1 || !strings.HasPrefix(first.RequestState, "taskgate-question.") {
			t.Fatalf("first round = task %+v, result %+v, %v; want the question in the result and no task", task, first, err)
		}
		second := deleteCall("op-before-task")
		second.InputResponses = mcp.InputResponseMap{}
		for k := range first.InputRequests {
			second.InputResponses[k] = acceptConfirm
		}
		second.RequestState = first.RequestState
		task, res, err := taskwire.CallToolAsTask(ctx, cs, second, nil)
		if err != nil || task == nil {
			t.Fatalf("second round = task %+v, result %+v, %v; want the task", task, res, err)
		}
		awaitDeleted(t, cs, task.ID)
		up.checkAnsweredOnce(t)
		r := receiptOf(t, g.store, "op-before-task")
		if len(r.Questions) != 1 || r.Questions[0].Answer != receipt.QuestionAnswered {
			t.Fatalf("the receipt's questions = %+v; want one, answered", r.Questions)
		}
	})
	t.Run("declares no elicitation", func(t *testing.T) {
		_, upURL := newConfirmUpstream(t)
		g := startInputGateway(t, upURL, "sqlite:"+filepath.Join(t.TempDir(), "taskgate.db"), withInputBeforeTask)
		askedTask(t, taskAskingClient(t, g, false), "op-task-at-once")
	})
}
