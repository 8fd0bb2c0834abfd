package mcpserver_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/legacyhttp"
	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/taskwire"
)

// A 2026-07-28 upstream task that asks for input while it runs: the
// upstream is a second taskgate (inner) in front of confirmUpstream, whose
// confirm_delete runs there as a task that waits in input_required with the
// question in tasks/get. The gateway in front (outer) follows that task as
// its operation's remote job.

// chainedUpstream is the outer gateway's configuration y with inner, at
// innerURL and reached with innerKey, as its one upstream, whose
// files.confirm_delete is consequential and passes the operation ID on as
// the inner gateway's operation_id.
func chainedUpstream(y, innerURL, innerKey string) string {
	return y[:strings.Index(y, "upstreams:")] + fmt.Sprintf(`upstreams:
  - name: inner
    url: %s
    timeout: 5s
    headers: {Authorization: "Bearer %s"}
    tools:
      files.confirm_delete:
        consequential: true
        retry_policy: no_automatic_resend
        secret_arguments: [token]
        contract:
          key: {argument: operation_id}
`, innerURL, innerKey)
}

// chainedGateways starts confirmUpstream, the inner gateway in front of it
// and the outer gateway in front of that, on outerDB.
func chainedGateways(t *testing.T, outerDB string) (*confirmUpstream, *inputGateway, *inputGateway) {
	t.Helper()
	up, upURL := newConfirmUpstream(t)
	inner := startInputGateway(t, upURL, "sqlite:"+filepath.Join(t.TempDir(), "inner.db"), nil)
	outer := startChainedOuter(t, inner, outerDB)
	return up, inner, outer
}

func startChainedOuter(t *testing.T, inner *inputGateway, db string) *inputGateway {
	t.Helper()
	return startInputGateway(t, "unused", db, func(y string) string { return chainedUpstream(y, inner.url, inner.key) })
}

func chainedDeleteCall(opID string) *mcp.CallToolParams {
	p := deleteCall(opID)
	p.Name = "inner.files.confirm_delete"
	return p
}

// checkTaskQuestionRecorded checks the outer ledger: one question, asked
// by the upstream task the operation is bound to and recorded without the
// secret argument, one answer of kind, and the one send that started the
// task.
func checkTaskQuestionRecorded(t *testing.T, s ledger.Store, opID string, kind ledger.EventKind) *ledger.Operation {
	t.Helper()
	op := operationOf(t, s, opID)
	requested := eventsOf(t, s, op, ledger.EventInputRequested)
	answered := eventsOf(t, s, op, kind)
	if len(requested) != 1 || len(answered) != 1 {
		t.Fatalf("events: %d input_requested, %d %s; want 1 each", len(requested), len(answered), kind)
	}
	q, err := ledger.DecodeEventData[ledger.InputRequestedData](requested[0])
	if err != nil || q.UpstreamTask == "" || q.InFlight {
		t.Fatalf("input_requested = %+v, %v; want a question of the upstream task", q, err)
	}
	jobs, err := s.RemoteJobList(testCtx(t), op.ID)
	if err != nil || len(jobs) != 1 || jobs[0].UpstreamTaskID != q.UpstreamTask {
		t.Fatalf("remote jobs = %+v, %v; want the one upstream task %s that asked", jobs, err, q.UpstreamTask)
	}
	if strings.Contains(string(requested[0].Data), "tok-s3cr3t") {
		t.Fatalf("input_requested data = %s; want the secret redacted", requested[0].Data)
	}
	if op.SendCount != 1 {
		t.Fatalf("send count %d; want the one send that started the task: the answer goes to the task", op.SendCount)
	}
	return op
}

// TestUpstreamTaskQuestionAnswered: the question of an upstream task
// reaches a 2026-07-28 client in tasks/get, its answer goes to that task
// with tasks/update, and the operation completes with the task's result
// and one provider job.
func TestUpstreamTaskQuestionAnswered(t *testing.T) {
	up, _, outer := chainedGateways(t, "sqlite:"+filepath.Join(t.TempDir(), "outer.db"))
	cs := outer.connect(t, fixtures.EraExtension)

	task := askedTaskOf(t, cs, chainedDeleteCall("op-chain"))
	if q := question(t, task, "confirm"); q.Message != "Delete report.txt with token tok-s3cr3t?" {
		t.Fatalf("question = %q", q.Message)
	}
	answerTask(t, cs, task.ID, "confirm", `{"action":"accept","content":{"confirm":true}}`)
	awaitDeleted(t, cs, task.ID)
	up.checkAnsweredOnce(t)
	op := checkTaskQuestionRecorded(t, outer.store, "op-chain", ledger.EventInputAnswered)
	r := receiptOf(t, outer.store, "op-chain")
	if r.State != string(ledger.StateCompleted) || r.ObservedRemoteJobs != 1 || len(r.Questions) != 1 || r.Questions[0].Answer != receipt.QuestionAnswered {
		t.Fatalf("receipt: state %s, %d remote jobs, questions %+v; want completed, one job, one answered question", r.State, r.ObservedRemoteJobs, r.Questions)
	}
	if op.State != ledger.StateCompleted {
		t.Fatalf("operation %s", op.State)
	}
}

// TestUpstreamTaskQuestionDeclined: a decline goes to the upstream task
// too (with tasks/update to a 2026-07-28 task, on tasks/result to a
// 2025-11-25 one), which ends cancelled with nothing started at the
// provider; the operation ends as the task did, and the receipt says
// declined.
func TestUpstreamTaskQuestionDeclined(t *testing.T) {
	for _, tt := range []struct {
		name  string
		chain func(t *testing.T) (*confirmUpstream, *inputGateway)
		key   string // the question's key in tasks/get
	}{
		{"2026-07-28 task", func(t *testing.T) (*confirmUpstream, *inputGateway) {
			up, _, outer := chainedGateways(t, "sqlite:"+filepath.Join(t.TempDir(), "outer.db"))
			return up, outer
		}, "confirm"},
		{"2025-11-25 task", func(t *testing.T) (*confirmUpstream, *inputGateway) {
			c := startLegacyChain(t, "sqlite:"+filepath.Join(t.TempDir(), "outer.db"))
			return c.up, c.outer
		}, "task_elicitation"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up, outer := tt.chain(t)
			cs := outer.connect(t, fixtures.EraExtension)
			task := askedTaskOf(t, cs, chainedDeleteCall("op-chain-declined"))
			answerTask(t, cs, task.ID, tt.key, `{"action":"decline"}`)
			if done := awaitTask(t, cs, task.ID); done.Status != taskwire.StatusCancelled {
				t.Fatalf("task = %s (%s); want cancelled", done.Status, done.StatusMessage)
			}
			if jobs, asked, answered, _ := up.counts(); jobs != 0 || asked != 1 || answered != 0 {
				t.Fatalf("provider saw %d jobs, %d questions, %d answers; want 0, 1, 0", jobs, asked, answered)
			}
			checkTaskQuestionRecorded(t, outer.store, "op-chain-declined", ledger.EventInputDeclined)
			testwait.Until(t, testCtx(t), "the receipt to settle", func() (bool, error) {
				r := receiptOf(t, outer.store, "op-chain-declined")
				return r.ReviewStatus == receipt.ReviewReady && len(r.Questions) == 1 && r.Questions[0].Answer == receipt.QuestionDeclined &&
						r.State == string(ledger.StateCancelled),
					fmt.Errorf("receipt: state %s, %s, questions %+v", r.State, r.ReviewStatus, r.Questions)
			})
		})
	}
}

// TestUpstreamTaskQuestionOnTasksResult: a 2025-11-25 client of the outer
// gateway is asked the upstream task's question on tasks/result, and its
// answer completes the operation.
func TestUpstreamTaskQuestionOnTasksResult(t *testing.T) {
	up, _, outer := chainedGateways(t, "sqlite:"+filepath.Join(t.TempDir(), "outer.db"))
	var asked []*mcp.ElicitParams
	cs := legacyElicitingClient(t, outer, &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, &asked)
	ctx := testCtx(t)
	task := askedTaskOf(t, cs, chainedDeleteCall("op-chain-legacy"))
	res, err := taskwire.TaskResult(ctx, cs, task.ID)
	if err != nil || fixtures.ResultText(res) != "deleted report.txt" {
		t.Fatalf("tasks/result = %s, %v; want deleted report.txt", fixtures.ResultText(res), err)
	}
	if len(asked) != 1 || !strings.HasPrefix(asked[0].Message, "Delete report.txt") {
		t.Fatalf("the client was asked %+v; want the upstream's question once", asked)
	}
	if jobs, _, answered, _ := up.counts(); jobs != 1 || answered != 1 {
		t.Fatalf("provider saw %d jobs, %d answers; want 1, 1", jobs, answered)
	}
	checkTaskQuestionRecorded(t, outer.store, "op-chain-legacy", ledger.EventInputAnswered)
}

// TestUpstreamTaskQuestionSurvivesRestart: the outer gateway restarted
// while the upstream task's question waits shows it again, and its answer
// still reaches the task, which completes with one provider job.
func TestUpstreamTaskQuestionSurvivesRestart(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "outer.db")
	up, inner, outer := chainedGateways(t, db)
	task := askedTaskOf(t, outer.connect(t, fixtures.EraExtension), chainedDeleteCall("op-chain-restart"))
	outer.stop()

	again := startChainedOuter(t, inner, db)
	answerAfterRestart(t, again.connect(t, fixtures.EraExtension), up, task.ID, "the restart")
	checkTaskQuestionRecorded(t, again.store, "op-chain-restart", ledger.EventInputAnswered)
}

// TestStdioUpstreamQuestion: confirm_delete in a stdio child that speaks
// 2026-07-28 asks with an input_required result; the question reaches the
// client through the task in either era, and the answer goes back in a
// second send that completes the operation with one provider job.
func TestStdioUpstreamQuestion(t *testing.T) {
	cmdLine, _ := json.Marshal([]string{os.Args[0]})
	for _, era := range []fixtures.Era{fixtures.EraExtension, fixtures.EraLegacy} {
		t.Run(string(era), func(t *testing.T) {
			g := startInputGateway(t, "stdio", "sqlite:"+filepath.Join(t.TempDir(), "taskgate.db"), func(y string) string {
				return strings.Replace(y, "    url: stdio/mcp", "    command: "+string(cmdLine)+"\n    env: {"+helperEnv+": confirm}", 1)
			})
			ctx := testCtx(t)
			var task *taskwire.Task
			var res *mcp.CallToolResult
			switch era {
			case fixtures.EraExtension:
				cs := g.connect(t, era)
				asked := askedTask(t, cs, "op-stdio-confirm")
				answerTask(t, cs, asked.ID, "confirm", `{"action":"accept","content":{"confirm":true}}`)
				task = awaitTask(t, cs, asked.ID)
				res = &mcp.CallToolResult{}
				if err := res.UnmarshalJSON(task.Result); err != nil {
					t.Fatalf("task %s ended %s without a result: %v", task.ID, task.Status, err)
				}
			default:
				var questions []*mcp.ElicitParams
				cs := legacyElicitingClient(t, g, &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, &questions)
				task = askedTaskOf(t, cs, deleteCall("op-stdio-confirm"))
				var err error
				if res, err = taskwire.TaskResult(ctx, cs, task.ID); err != nil {
					t.Fatal(err)
				}
				if len(questions) != 1 || !strings.HasPrefix(questions[0].Message, "Delete report.txt") {
					t.Fatalf("the client was asked %+v; want the upstream's question once", questions)
				}
			}
			if fixtures.ResultText(res) != "deleted report.txt" {
				t.Fatalf("result = %q; want deleted report.txt", fixtures.ResultText(res))
			}
			op := operationOf(t, g.store, "op-stdio-confirm")
			if op.State != ledger.StateCompleted || op.SendCount != 2 {
				t.Fatalf("operation %s after %d sends; want completed after the question's send and its continuation", op.State, op.SendCount)
			}
			r := receiptOf(t, g.store, "op-stdio-confirm")
			if r.ObservedRemoteJobs != 1 || len(r.Questions) != 1 || r.Questions[0].Answer != receipt.QuestionAnswered {
				t.Fatalf("receipt: %d remote jobs, questions %+v; want one job and one answered question", r.ObservedRemoteJobs, r.Questions)
			}
		})
	}
}

// TestUnansweredUpstreamTaskQuestion: a question of an upstream task that
// nobody answers within the task's retention fails the operation, and the
// upstream task, which would wait for an answer that never comes, is
// cancelled; in either era of upstream task.
func TestUnansweredUpstreamTaskQuestion(t *testing.T) {
	for _, tt := range []struct {
		name  string
		front func(*testing.T, *inputGateway) *inputGateway
	}{
		{"2026-07-28 task", func(_ *testing.T, g *inputGateway) *inputGateway { return g }},
		{"2025-11-25 task", func(t *testing.T, g *inputGateway) *inputGateway { return legacyFront(t, g, new(atomic.Int32)) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up, upURL := newConfirmUpstream(t)
			inner := tt.front(t, startInputGateway(t, upURL, "sqlite:"+filepath.Join(t.TempDir(), "inner.db"), nil))
			outer := startInputGateway(t, "unused", "sqlite:"+filepath.Join(t.TempDir(), "outer.db"), func(y string) string {
				y = chainedUpstream(y, inner.url, inner.key)
				return strings.Replace(y, "poll_interval: 100ms", "poll_interval: 100ms\ntask_ttl: 1s", 1)
			})
			cs := outer.connect(t, fixtures.EraExtension)
			ctx := testCtx(t)
			task := askedTaskOf(t, cs, chainedDeleteCall("op-chain-unanswered"))
			var done *taskwire.Task
			testwait.Until(t, ctx, "the unanswered task to end", func() (bool, error) {
				var err error
				done, err = taskwire.GetTask(ctx, cs, task.ID)
				return err == nil && done.Status.IsTerminal(), fmt.Errorf("task %+v, %v", done, err)
			})
			if done.Status != taskwire.StatusFailed || done.Error == nil || !strings.Contains(done.Error.Message, "nobody answered") {
				t.Fatalf("task = %s %+v; want failed because nobody answered", done.Status, done.Error)
			}
			op := operationOf(t, outer.store, "op-chain-unanswered")
			jobs, err := outer.store.RemoteJobList(ctx, op.ID)
			if err != nil || len(jobs) != 1 {
				t.Fatalf("remote jobs = %+v, %v; want the upstream task", jobs, err)
			}
			innerCS := inner.connect(t, fixtures.EraExtension)
			testwait.Until(t, ctx, "the upstream task to be cancelled", func() (bool, error) {
				got, err := taskwire.GetTask(ctx, innerCS, jobs[0].UpstreamTaskID)
				return err == nil && got.Status == taskwire.StatusCancelled, fmt.Errorf("upstream task %+v, %v", got, err)
			})
			if n, asked, answered, _ := up.counts(); n != 0 || asked != 1 || answered != 0 {
				t.Fatalf("provider saw %d jobs, %d questions, %d answers; want 0, 1, 0", n, asked, answered)
			}
		})
	}
}

// A 2025-11-25 upstream task that asks for input: the inner gateway is
// reached through legacyFront, so the outer gateway speaks 2025-11-25 to
// it, and confirm_delete runs there as a 2025-11-25 task that waits in
// input_required and asks its question only on tasks/result.

// legacyFront serves g as a server that speaks only 2025-11-25 (see
// legacyhttp), passing everything else to g as it is; results counts the
// tasks/result requests it passed on.
func legacyFront(t *testing.T, g *inputGateway, results *atomic.Int32) *inputGateway {
	t.Helper()
	target, err := url.Parse(g.url)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.Out.URL.Scheme, r.Out.URL.Host = target.Scheme, target.Host },
		FlushInterval: -1, // streams reach the client as they are written
	}
	front := httptest.NewServer(legacyhttp.RefuseDiscover(proxy, func(method string) {
		if method == "tasks/result" {
			results.Add(1)
		}
	}))
	t.Cleanup(front.Close)
	return &inputGateway{url: front.URL + target.Path, key: g.key, store: g.store}
}

// legacyChain is confirmUpstream, the inner gateway in front of it behind
// legacyFront, and the outer gateway in front of that.
type legacyChain struct {
	up           *confirmUpstream
	inner, outer *inputGateway
	// taskResults counts the outer gateway's tasks/result requests.
	taskResults atomic.Int32
}

func startLegacyChain(t *testing.T, outerDB string) *legacyChain {
	t.Helper()
	c := &legacyChain{}
	up, upURL := newConfirmUpstream(t)
	c.up = up
	c.inner = legacyFront(t, startInputGateway(t, upURL, "sqlite:"+filepath.Join(t.TempDir(), "inner.db"), nil), &c.taskResults)
	c.outer = startChainedOuter(t, c.inner, outerDB)
	return c
}

const acceptDelete = `{"action":"accept","content":{"confirm":true}}`

// TestLegacyUpstreamTaskQuestion: the question a 2025-11-25 upstream task
// asks on tasks/result reaches the outer gateway's client in either era,
// the answer goes back on that tasks/result, and the operation completes
// with the task's result and one provider job.
func TestLegacyUpstreamTaskQuestion(t *testing.T) {
	for _, era := range []fixtures.Era{fixtures.EraExtension, fixtures.EraLegacy} {
		t.Run(string(era), func(t *testing.T) {
			c := startLegacyChain(t, "sqlite:"+filepath.Join(t.TempDir(), "outer.db"))
			up, outer := c.up, c.outer
			if got := taskwire.ServerOffersTasks(c.inner.connect(t, fixtures.EraExtension)); got != taskwire.EraLegacy {
				t.Fatalf("the inner gateway offers %v tasks through its front; want 2025-11-25's", got)
			}
			ctx := testCtx(t)
			opID := "op-legacy-task-" + string(era)
			var res *mcp.CallToolResult
			switch era {
			case fixtures.EraExtension:
				cs := outer.connect(t, era)
				task := askedTaskOf(t, cs, chainedDeleteCall(opID))
				if q := question(t, task, "task_elicitation"); q.Message != "Delete report.txt with token tok-s3cr3t?" {
					t.Fatalf("question = %q", q.Message)
				}
				answerTask(t, cs, task.ID, "task_elicitation", acceptDelete)
				done := awaitTask(t, cs, task.ID)
				res = &mcp.CallToolResult{}
				if done.Status != taskwire.StatusCompleted || res.UnmarshalJSON(done.Result) != nil {
					t.Fatalf("task = %s %s %s; want completed with a result", done.Status, done.StatusMessage, done.Result)
				}
			default:
				var asked []*mcp.ElicitParams
				cs := legacyElicitingClient(t, outer, &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, &asked)
				task := askedTaskOf(t, cs, chainedDeleteCall(opID))
				var err error
				if res, err = taskwire.TaskResult(ctx, cs, task.ID); err != nil {
					t.Fatal(err)
				}
				if len(asked) != 1 || !strings.HasPrefix(asked[0].Message, "Delete report.txt") {
					t.Fatalf("the client was asked %+v; want the upstream task's question once", asked)
				}
			}
			if fixtures.ResultText(res) != "deleted report.txt" {
				t.Fatalf("result = %q; want deleted report.txt", fixtures.ResultText(res))
			}
			up.checkAnsweredOnce(t)
			checkTaskQuestionRecorded(t, outer.store, opID, ledger.EventInputAnswered)
			r := receiptOf(t, outer.store, opID)
			if r.State != string(ledger.StateCompleted) || r.ObservedRemoteJobs != 1 || len(r.Questions) != 1 || r.Questions[0].Answer != receipt.QuestionAnswered {
				t.Fatalf("receipt: state %s, %d remote jobs, questions %+v; want completed, one job, one answered question", r.State, r.ObservedRemoteJobs, r.Questions)
			}
		})
	}
}

// TestLegacyUpstreamTaskQuestionSurvivesRestart: the outer gateway
// restarted while a 2025-11-25 upstream task's question waits asks its
// client the same question again (the task asks it again on the new
// tasks/result, and it is not recorded twice), and the answer completes
// the operation with one provider job.
func TestLegacyUpstreamTaskQuestionSurvivesRestart(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "outer.db")
	c := startLegacyChain(t, db)
	up := c.up
	task := askedTaskOf(t, c.outer.connect(t, fixtures.EraExtension), chainedDeleteCall("op-legacy-task-restart"))
	c.outer.stop()
	before := c.taskResults.Load()

	again := startChainedOuter(t, c.inner, db)
	cs := again.connect(t, fixtures.EraExtension)
	ctx := testCtx(t)
	testwait.Until(t, ctx, "the restarted gateway to read the task's result", func() (bool, error) {
		return c.taskResults.Load() > before, errors.New("no tasks/result since the restart")
	})
	got, err := taskwire.GetTask(ctx, cs, task.ID)
	if err != nil || got.Status != taskwire.StatusInputRequired {
		t.Fatalf("after the restart: %+v, %v; want input_required", got, err)
	}
	if q := question(t, got, "task_elicitation"); !strings.HasPrefix(q.Message, "Delete report.txt") {
		t.Fatalf("question after the restart = %q", q.Message)
	}
	answerTask(t, cs, task.ID, "task_elicitation", acceptDelete)
	if done := awaitTask(t, cs, task.ID); done.Status != taskwire.StatusCompleted {
		t.Fatalf("task = %s (%s), want completed", done.Status, done.StatusMessage)
	}
	up.checkAnsweredOnce(t)
	checkTaskQuestionRecorded(t, again.store, "op-legacy-task-restart", ledger.EventInputAnswered)
}

// TestLegacyUpstreamTaskQuestionWithoutAWayToAnswer: a client without
// tasks cannot be asked a 2025-11-25 upstream task's question either, so
// the operation waits for a human, and nothing answers the task for it.
func TestLegacyUpstreamTaskQuestionWithoutAWayToAnswer(t *testing.T) {
	up, upURL := newConfirmUpstream(t)
	inner := legacyFront(t, startInputGateway(t, upURL, "sqlite:"+filepath.Join(t.TempDir(), "inner.db"), nil), new(atomic.Int32))
	outer := startInputGateway(t, "unused", "sqlite:"+filepath.Join(t.TempDir(), "outer.db"), func(y string) string {
		return strings.Replace(chainedUpstream(y, inner.url, inner.key), "wait: 20s", "wait: 300ms", 1)
	})
	if _, err := outer.connect(t, fixtures.EraPlain).CallTool(testCtx(t), chainedDeleteCall("op-legacy-task-plain")); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, testCtx(t), "the operation to wait for review", func() (bool, error) {
		op := operationOf(t, outer.store, "op-legacy-task-plain")
		return op.State == ledger.StateReview && op.ReviewReason == ledger.ReasonUpstreamInputRequired, fmt.Errorf("state %s (%s)", op.State, op.ReviewReason)
	})
	if jobs, asked, answered, _ := up.counts(); jobs != 0 || asked != 1 || answered != 0 {
		t.Fatalf("provider saw %d jobs, %d questions, %d answers; want 0, 1, 0", jobs, asked, answered)
	}
}
