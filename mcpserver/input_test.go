package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/daemon"
	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/dburl"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/secrets"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/taskwire"
)

// confirmUpstream is a 2026-07-28 server whose confirm_delete asks the
// user to confirm (an input_required result) and runs its one job only in
// the round that carries the answer, as the conformance fixture's does.
// Its jobs are keyed by the idempotency key, and lookup_job finds them.
type confirmUpstream struct {
	mu sync.Mutex
	// jobs maps an idempotency key to the job the key started.
	jobs map[string]confirmJob
	// asked counts first rounds; answered the rounds with an answer.
	asked, answered int
	// badState counts answers whose requestState was not the one sent.
	badState int
	// askTwice makes the first answer bring the same question again,
	// under the same key, before the job starts.
	askTwice bool
	// hold, when set, keeps an answered call open after its job started,
	// until it is closed or the caller goes; entered is closed then.
	hold, entered chan struct{}
}

type keyArgs struct {
	IdempotencyKey string `json:"idempotency_key"`
}

type confirmJob struct {
	ID, Text string
}

type confirmArgs struct {
	Filename       string `json:"filename"`
	Token          string `json:"token,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

func newConfirmUpstream(t *testing.T) (*confirmUpstream, string) {
	u, server := newConfirmServer()
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(srv.Close)
	return u, srv.URL
}

// newConfirmServer is the MCP server of a confirmUpstream, for any
// transport.
func newConfirmServer() (*confirmUpstream, *mcp.Server) {
	u := &confirmUpstream{jobs: map[string]confirmJob{}}
	server := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "confirm_delete", Description: "Deletes a file once the user confirms."}, u.confirmDelete)
	mcp.AddTool(server, &mcp.Tool{Name: "lookup_job"}, u.lookupJob)
	return u, server
}

func stateFor(a confirmArgs) string { return "confirm-state:" + a.Filename + ":" + a.IdempotencyKey }

func (u *confirmUpstream) confirmDelete(ctx context.Context, req *mcp.CallToolRequest, a confirmArgs) (*mcp.CallToolResult, any, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	resp, ok := req.Params.InputResponses["confirm"]
	if !ok {
		u.asked++
		msg := fmt.Sprintf("Delete %s?", a.Filename)
		if a.Token != "" {
			msg = fmt.Sprintf("Delete %s with token %s?", a.Filename, a.Token)
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{
			Mode: "form", Message: msg,
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"confirm": map[string]any{"type": "boolean"}}, "required": []string{"confirm"}},
		}}, RequestState: stateFor(a)}, nil, nil
	}
	u.answered++
	want := stateFor(a)
	if u.askTwice && u.answered == 2 {
		want = "again:" + stateFor(a)
	}
	if req.Params.RequestState != want {
		u.badState++
		return nil, nil, fmt.Errorf("requestState %q is not the one this server sent", req.Params.RequestState)
	}
	if u.askTwice && u.answered == 1 {
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{
			Mode: "form", Message: "Really delete " + a.Filename + "?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"confirm": map[string]any{"type": "boolean"}}},
		}}, RequestState: "again:" + stateFor(a)}, nil, nil
	}
	answer, ok := resp.(*mcp.ElicitResult)
	if !ok {
		return nil, nil, fmt.Errorf("the answer to confirm is a %T, not an elicitation result", resp)
	}
	j, ok := u.jobs[a.IdempotencyKey]
	if !ok {
		text := "kept " + a.Filename
		if answer.Action == "accept" && answer.Content["confirm"] == true {
			text = "deleted " + a.Filename
		}
		j = confirmJob{ID: fmt.Sprintf("del-%d", len(u.jobs)+1), Text: text}
		u.jobs[a.IdempotencyKey] = j
	}
	if u.hold != nil {
		u.mu.Unlock()
		close(u.entered)
		select {
		case <-u.hold:
		case <-ctx.Done():
		}
		u.mu.Lock()
		u.hold = nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: j.Text}}, StructuredContent: map[string]any{"job_id": j.ID}}, nil, nil
}

func (u *confirmUpstream) lookupJob(_ context.Context, _ *mcp.CallToolRequest, a keyArgs) (*mcp.CallToolResult, any, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	j, ok := u.jobs[a.IdempotencyKey]
	sc := map[string]any{"status": "not_found", "jobs": []any{}}
	if ok {
		sc = map[string]any{"status": "completed", "job_id": j.ID, "jobs": []any{map[string]any{"job_id": j.ID, "status": "completed"}}}
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "looked up"}}, StructuredContent: sc}, nil, nil
}

func (u *confirmUpstream) counts() (jobs, asked, answered, badState int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.jobs), u.asked, u.answered, u.badState
}

// checkAnsweredOnce fails unless the upstream started one job after asking
// its question once and taking one answer, with its own requestState.
func (u *confirmUpstream) checkAnsweredOnce(t *testing.T) {
	t.Helper()
	if jobs, asked, answered, bad := u.counts(); jobs != 1 || asked != 1 || answered != 1 || bad != 0 {
		t.Fatalf("upstream saw %d jobs, %d questions, %d answers, %d with another requestState; want 1, 1, 1, 0", jobs, asked, answered, bad)
	}
}

// awaitDeleted waits for task taskID to end, and fails unless it
// completed with confirm_delete's result.
func awaitDeleted(t *testing.T, cs *mcp.ClientSession, taskID string) {
	t.Helper()
	done := awaitTask(t, cs, taskID)
	var res mcp.CallToolResult
	if done.Status != taskwire.StatusCompleted || res.UnmarshalJSON(done.Result) != nil || fixtures.ResultText(&res) != "deleted report.txt" {
		t.Fatalf("task = %s %s %s; want completed with deleted report.txt", done.Status, done.StatusMessage, done.Result)
	}
}

// inputGateway is a gateway whose upstream files has confirm_delete as a
// consequential tool with token a secret argument, on ledger db.
type inputGateway struct {
	d     *daemon.Daemon
	store ledger.Store
	url   string
	key   string
}

// inputConfig is the harness configuration with files in place of the
// simulated provider, its secret argument sealed with the key in keyFile;
// edit changes the text.
func inputConfig(upstreamURL, db, keyFile string, edit func(string) string) string {
	y := withFilesUpstream(fixtures.ConfigYAML("unused", "127.0.0.1:0", db, fixtures.ConfigOptions{SecretsKeyFile: keyFile}), upstreamURL)
	if edit != nil {
		y = edit(y)
	}
	return y
}

// withFilesUpstream is the harness configuration y with files, at
// upstreamURL, in place of the simulated provider.
func withFilesUpstream(y, upstreamURL string) string {
	return y[:strings.Index(y, "upstreams:")] + fmt.Sprintf(`upstreams:
  - name: files
    url: %s/mcp
    timeout: 5s
    tasks: "off"
    tools:
      confirm_delete:
        consequential: true
        retry_policy: lookup_then_attach
        secret_arguments: [token]
        contract:
          key: {argument: idempotency_key}
          remote_job_id_field: job_id
          lookup:
            tool: lookup_job
            arguments: {idempotency_key: "{operation_id}"}
            status_field: status
            remote_job_id_field: job_id
            jobs_field: jobs
            statuses: {not_found: [not_found], completed: [completed]}
      lookup_job: {}
`, upstreamURL)
}

func startInputGateway(t *testing.T, upstreamURL, db string, edit func(string) string) *inputGateway {
	t.Helper()
	ctx := testCtx(t)
	// The key lives beside the ledger, so that a gateway restarted on the
	// same ledger opens what the first one sealed.
	keyFile := filepath.Join(filepath.Dir(strings.TrimPrefix(db, "sqlite:")), "taskgate.keys")
	if _, err := os.Stat(keyFile); errors.Is(err, fs.ErrNotExist) {
		if err := os.WriteFile(keyFile, []byte(secrets.NewKey()+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ring, err := secrets.Load(keyFile, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(strings.NewReader(inputConfig(upstreamURL, db, keyFile, edit)), "input.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	store, err := dburl.Open(ctx, db, &dburl.Options{Migrate: true, Secrets: ring})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	d, err := daemon.Start(ctx, &daemon.Options{Config: cfg, Store: store, Secrets: ring})
	if err != nil {
		t.Fatal(err)
	}
	g := &inputGateway{d: d, store: store, url: d.URL + "/mcp"}
	t.Cleanup(func() { g.stop() })
	if g.key, _, err = authn.NewAPIKey(ctx, store, "acme", "test"); err != nil {
		t.Fatal(err)
	}
	return g
}

func (g *inputGateway) stop() {
	if g.d != nil {
		g.d.Stop(context.Background())
		g.d = nil
	}
}

func (g *inputGateway) connect(t *testing.T, era fixtures.Era) *mcp.ClientSession {
	t.Helper()
	cs, err := fixtures.Dial(testCtx(t), g.url, g.key, era, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func deleteCall(opID string) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: "files.confirm_delete", Arguments: map[string]any{
		"filename": "report.txt", "token": "tok-s3cr3t", "operation_id": opID,
	}}
}

// askedTask starts confirm_delete as a task and waits for the question.
func askedTask(t *testing.T, cs *mcp.ClientSession, opID string) *taskwire.Task {
	t.Helper()
	return askedTaskOf(t, cs, deleteCall(opID))
}

// askedTaskOf starts call as a task, in the era of cs, and waits for the
// question.
func askedTaskOf(t *testing.T, cs *mcp.ClientSession, call *mcp.CallToolParams) *taskwire.Task {
	t.Helper()
	task, res, err := taskwire.CallToolAsTask(testCtx(t), cs, call, nil)
	if err != nil || task == nil {
		t.Fatalf("tools/call = %v, %+v, %v; want a task", task, res, err)
	}
	got := awaitTask(t, cs, task.ID)
	if got.Status != taskwire.StatusInputRequired {
		t.Fatalf("task is %s (%s), want input_required", got.Status, got.StatusMessage)
	}
	return got
}

// question reads the elicitation of key from an input_required task.
func question(t *testing.T, task *taskwire.Task, key string) *mcp.ElicitParams {
	t.Helper()
	var q struct {
		Method string            `json:"method"`
		Params *mcp.ElicitParams `json:"params"`
	}
	if err := json.Unmarshal(task.InputRequests[key], &q); err != nil || q.Method != "elicitation/create" || q.Params == nil {
		t.Fatalf("inputRequests = %v; want an elicitation under %q (%v)", task.InputRequests, key, err)
	}
	return q.Params
}

func answerTask(t *testing.T, cs *mcp.ClientSession, id, key, answer string) {
	t.Helper()
	if err := taskwire.UpdateTask(testCtx(t), cs, id, map[string]json.RawMessage{key: json.RawMessage(answer)}); err != nil {
		t.Fatalf("tasks/update: %v", err)
	}
}

func operationOf(t *testing.T, s ledger.Store, opID string) *ledger.Operation {
	t.Helper()
	op, err := s.OperationGet(testCtx(t), &ledger.OperationGetParams{Tenant: "acme", OperationID: opID})
	if err != nil {
		t.Fatal(err)
	}
	return op
}

// eventsOf returns the operation's events of kind.
func eventsOf(t *testing.T, s ledger.Store, op *ledger.Operation, kind ledger.EventKind) []*ledger.Event {
	t.Helper()
	all, err := s.EventList(testCtx(t), op.ID)
	if err != nil {
		t.Fatal(err)
	}
	var out []*ledger.Event
	for _, e := range all {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// TestUpstreamQuestionAnswered: the upstream's question reaches a
// 2026-07-28 client through the task, the answer goes back with the
// upstream's requestState under the same provider key, and the operation
// completes with one job. The ledger records question and answer, without
// the secret argument the question echoed.
func TestUpstreamQuestionAnswered(t *testing.T) {
	up, upURL := newConfirmUpstream(t)
	g := startInputGateway(t, upURL, "sqlite:"+filepath.Join(t.TempDir(), "taskgate.db"), nil)
	cs := g.connect(t, fixtures.EraExtension)

	task := askedTask(t, cs, "op-confirm")
	if q := question(t, task, "confirm"); q.Message != "Delete report.txt with token tok-s3cr3t?" {
		t.Fatalf("question = %q", q.Message)
	}
	if op := operationOf(t, g.store, "op-confirm"); op.StatusMessage != "the upstream asks: Delete report.txt with token [redacted]?" {
		t.Fatalf("status message = %q; want the question with the secret redacted", op.StatusMessage)
	}
	answerTask(t, cs, task.ID, "unknown_key", `{"action":"accept","content":{"confirm":true}}`)
	if again, err := taskwire.GetTask(testCtx(t), cs, task.ID); err != nil || again.Status != taskwire.StatusInputRequired {
		t.Fatalf("after an answer to no question: %+v, %v; want still input_required", again, err)
	}
	answerTask(t, cs, task.ID, "confirm", `{"action":"accept","content":{"confirm":true}}`)
	awaitDeleted(t, cs, task.ID)
	up.checkAnsweredOnce(t)

	op := operationOf(t, g.store, "op-confirm")
	requested := eventsOf(t, g.store, op, ledger.EventInputRequested)
	answeredEv := eventsOf(t, g.store, op, ledger.EventInputAnswered)
	if len(requested) != 1 || len(answeredEv) != 1 {
		t.Fatalf("events: %d input_requested, %d input_answered; want 1 each", len(requested), len(answeredEv))
	}
	q, err := ledger.DecodeEventData[ledger.InputRequestedData](requested[0])
	if err != nil || q.Send != 1 || !q.RequestState || q.Channel != ledger.InputChannelTaskUpdate {
		t.Fatalf("input_requested = %+v, %v", q, err)
	}
	if strings.Contains(string(requested[0].Data), "tok-s3cr3t") || !strings.Contains(string(requested[0].Data), "Delete report.txt with token [redacted]?") {
		t.Fatalf("input_requested data = %s; want the question with the secret redacted", requested[0].Data)
	}
	a, err := ledger.DecodeEventData[ledger.InputAnsweredData](answeredEv[0])
	if err != nil || a.Actions["confirm"] != "accept" || a.Send != 1 {
		t.Fatalf("input_answered = %+v, %v", a, err)
	}
	sends := eventsOf(t, g.store, op, ledger.EventSendStarted)
	if len(sends) != 2 || op.SendCount != 2 {
		t.Fatalf("%d send_started events, send count %d; want the question's send and its continuation", len(sends), op.SendCount)
	}
}

// TestUpstreamQuestionDeclined: a declined question ends the operation
// with nothing more sent, and the task says why.
func TestUpstreamQuestionDeclined(t *testing.T) {
	for _, action := range []string{"decline", "cancel"} {
		t.Run(action, func(t *testing.T) {
			up, upURL := newConfirmUpstream(t)
			g := startInputGateway(t, upURL, "sqlite:"+filepath.Join(t.TempDir(), "taskgate.db"), nil)
			cs := g.connect(t, fixtures.EraExtension)
			task := askedTask(t, cs, "op-declined")
			answerTask(t, cs, task.ID, "confirm", `{"action":"`+action+`"}`)
			done := awaitTask(t, cs, task.ID)
			if done.Status != taskwire.StatusCancelled || !strings.Contains(done.StatusMessage, action) {
				t.Fatalf("task = %s (%s); want cancelled, saying %s", done.Status, done.StatusMessage, action)
			}
			if jobs, asked, answered, _ := up.counts(); jobs != 0 || asked != 1 || answered != 0 {
				t.Fatalf("upstream saw %d jobs, %d questions, %d answers; want 0, 1, 0", jobs, asked, answered)
			}
			op := operationOf(t, g.store, "op-declined")
			if ev := eventsOf(t, g.store, op, ledger.EventInputDeclined); len(ev) != 1 || op.SendCount != 1 {
				t.Fatalf("%d input_declined events, send count %d; want 1, 1", len(ev), op.SendCount)
			}
			in, err := receipt.Load(testCtx(t), g.store, op, nil)
			if err != nil {
				t.Fatal(err)
			}
			r := receipt.Build(in)
			if len(r.Questions) != 1 || r.Questions[0].Answer != receipt.QuestionDeclined || r.Questions[0].Action != action ||
				r.State != string(ledger.StateCancelled) || r.ObservedRemoteJobs != 0 || r.ReviewStatus != receipt.ReviewReady {
				t.Fatalf("receipt: state %s, %d remote jobs, %s, questions %+v; want cancelled, none, ready, one declined with %s",
					r.State, r.ObservedRemoteJobs, r.ReviewStatus, r.Questions, action)
			}
		})
	}
}

// TestUpstreamQuestionSurvivesRestart: everything the question needs is in
// the ledger, so a gateway restarted while it waits still shows it, and
// its answer completes the operation with one job.
func TestUpstreamQuestionSurvivesRestart(t *testing.T) {
	up, upURL := newConfirmUpstream(t)
	db := "sqlite:" + filepath.Join(t.TempDir(), "taskgate.db")
	g := startInputGateway(t, upURL, db, nil)
	task := askedTask(t, g.connect(t, fixtures.EraExtension), "op-restart")
	g.stop()

	g2 := startInputGateway(t, upURL, db, nil)
	answerAfterRestart(t, g2.connect(t, fixtures.EraExtension), up, task.ID, "the restart")
}

// answerAfterRestart checks that the confirm question of task is still
// asked after the gateway came back (after when), answers it, and checks
// the task completes with one upstream job.
func answerAfterRestart(t *testing.T, cs *mcp.ClientSession, up *confirmUpstream, taskID, when string) {
	t.Helper()
	again, err := taskwire.GetTask(testCtx(t), cs, taskID)
	if err != nil || again.Status != taskwire.StatusInputRequired {
		t.Fatalf("after %s: %+v, %v; want input_required", when, again, err)
	}
	if q := question(t, again, "confirm"); !strings.HasPrefix(q.Message, "Delete report.txt") {
		t.Fatalf("question after %s = %q", when, q.Message)
	}
	answerTask(t, cs, taskID, "confirm", `{"action":"accept","content":{"confirm":true}}`)
	if done := awaitTask(t, cs, taskID); done.Status != taskwire.StatusCompleted {
		t.Fatalf("task = %s (%s), want completed", done.Status, done.StatusMessage)
	}
	up.checkAnsweredOnce(t)
}

// TestUpstreamQuestionWithoutAWayToAnswer: a client without tasks cannot
// be asked, so the operation waits for a human, as before.
func TestUpstreamQuestionWithoutAWayToAnswer(t *testing.T) {
	up, upURL := newConfirmUpstream(t)
	g := startInputGateway(t, upURL, "sqlite:"+filepath.Join(t.TempDir(), "taskgate.db"), func(y string) string {
		return strings.Replace(y, "wait: 20s", "wait: 300ms", 1)
	})
	cs := g.connect(t, fixtures.EraPlain)
	if _, err := cs.CallTool(testCtx(t), deleteCall("op-plain")); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, testCtx(t), "the operation to wait for review", func() (bool, error) {
		op := operationOf(t, g.store, "op-plain")
		return op.State == ledger.StateReview && op.ReviewReason == ledger.ReasonUpstreamInputRequired, fmt.Errorf("state %s (%s)", op.State, op.ReviewReason)
	})
	if jobs, _, answered, _ := up.counts(); jobs != 0 || answered != 0 {
		t.Fatalf("upstream saw %d jobs, %d answers; want none", jobs, answered)
	}
}

// legacyElicitingClient opens a 2025-11-25 session with tasks whose user
// answers every elicitation with answer, and records the questions.
func legacyElicitingClient(t *testing.T, g *inputGateway, answer *mcp.ElicitResult, asked *[]*mcp.ElicitParams) *mcp.ClientSession {
	t.Helper()
	var mu sync.Mutex
	client := mcp.NewClient(&mcp.Implementation{Name: "legacy-eliciting"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			*asked = append(*asked, req.Params)
			mu.Unlock()
			return answer, nil
		},
	})
	if err := taskwire.InstallClient(client); err != nil {
		t.Fatal(err)
	}
	transport := taskwire.WrapClientTransport(&mcp.StreamableClientTransport{
		Endpoint: g.url, MaxRetries: -1, HTTPClient: &http.Client{Transport: fixtures.Bearer{Key: g.key}},
	})
	cs, err := client.Connect(testCtx(t), transport, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestLegacyClientIsAskedOnTasksResult: a 2025-11-25 client sees
// input_required in tasks/get and is asked the upstream's question, tagged
// with its task, on tasks/result; its answer completes the operation.
func TestLegacyClientIsAskedOnTasksResult(t *testing.T) {
	for _, tt := range []struct {
		name   string
		answer *mcp.ElicitResult
		jobs   int
		status taskwire.Status
	}{
		{"accepted", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, 1, taskwire.StatusCompleted},
		{"declined", &mcp.ElicitResult{Action: "decline"}, 0, taskwire.StatusCancelled},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up, upURL := newConfirmUpstream(t)
			g := startInputGateway(t, upURL, "sqlite:"+filepath.Join(t.TempDir(), "taskgate.db"), nil)
			var asked []*mcp.ElicitParams
			cs := legacyElicitingClient(t, g, tt.answer, &asked)
			ctx := testCtx(t)
			task := askedTaskOf(t, cs, deleteCall("op-legacy"))
			res, err := taskwire.TaskResult(ctx, cs, task.ID)
			if tt.status == taskwire.StatusCompleted && (err != nil || fixtures.ResultText(res) != "deleted report.txt") {
				t.Fatalf("tasks/result = %s, %v; want deleted report.txt", fixtures.ResultText(res), err)
			}
			if tt.status == taskwire.StatusCancelled && err == nil {
				t.Fatalf("tasks/result of a declined question = %s; want an error", fixtures.ResultText(res))
			}
			if len(asked) != 1 || !strings.HasPrefix(asked[0].Message, "Delete report.txt") {
				t.Fatalf("the client was asked %+v; want the upstream's question once", asked)
			}
			if rel, _ := asked[0].Meta[taskwire.RelatedTaskMetaKey].(map[string]any); rel["taskId"] != task.ID {
				t.Fatalf("the question's _meta = %v; want it tagged with task %s", asked[0].Meta, task.ID)
			}
			if got, err := taskwire.GetTask(ctx, cs, task.ID); err != nil || got.Status != tt.status {
				t.Fatalf("task = %+v, %v; want %s", got, err, tt.status)
			}
			if jobs, _, _, _ := up.counts(); jobs != tt.jobs {
				t.Fatalf("upstream jobs = %d, want %d", jobs, tt.jobs)
			}
		})
	}
}

// TestUnansweredQuestionEndsWithTheTask: a client that never answers
// leaves the task input_required until its retention passes; then it
// fails, and nothing more is sent.
func TestUnansweredQuestionEndsWithTheTask(t *testing.T) {
	up, upURL := newConfirmUpstream(t)
	g := startInputGateway(t, upURL, "sqlite:"+filepath.Join(t.TempDir(), "taskgate.db"), func(y string) string {
		return strings.Replace(y, "poll_interval: 100ms", "poll_interval: 100ms\ntask_ttl: 1s", 1)
	})
	cs := g.connect(t, fixtures.EraExtension)
	task := askedTask(t, cs, "op-unanswered")
	var done *taskwire.Task
	testwait.Until(t, testCtx(t), "the unanswered task to end", func() (bool, error) {
		var err error
		done, err = taskwire.GetTask(testCtx(t), cs, task.ID)
		return err == nil && done.Status.IsTerminal(), fmt.Errorf("task %+v, %v", done, err)
	})
	if done.Status != taskwire.StatusFailed || done.Error == nil || !strings.Contains(done.Error.Message, "nobody answered") {
		t.Fatalf("task = %s %+v; want failed because nobody answered", done.Status, done.Error)
	}
	if jobs, asked, answered, _ := up.counts(); jobs != 0 || asked != 1 || answered != 0 {
		t.Fatalf("upstream saw %d jobs, %d questions, %d answers; want 0, 1, 0", jobs, asked, answered)
	}
}

// elicitingUpstream is a 2025-11-25 server whose confirm_delete asks the
// user with elicitation/create within the call, and starts its one job,
// keyed by the idempotency key, only when the user confirms; otherwise it
// answers with an error result that names no job.
type elicitingUpstream struct {
	mu      sync.Mutex
	jobs    map[string]string
	actions []string
}

func newElicitingUpstream(t *testing.T) (*elicitingUpstream, string) {
	u := &elicitingUpstream{jobs: map[string]string{}}
	server := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: []string{"2025-11-25"}})
	mcp.AddTool(server, &mcp.Tool{Name: "confirm_delete"}, func(ctx context.Context, req *mcp.CallToolRequest, a confirmArgs) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Delete " + a.Filename + "?", RequestedSchema: map[string]any{
			"type": "object", "properties": map[string]any{"confirm": map[string]any{"type": "boolean"}},
		}})
		if err != nil {
			return nil, nil, err
		}
		u.mu.Lock()
		defer u.mu.Unlock()
		u.actions = append(u.actions, res.Action)
		if res.Action != "accept" || res.Content["confirm"] != true {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "kept " + a.Filename + ": the deletion was not confirmed"}}}, nil, nil
		}
		id, ok := u.jobs[a.IdempotencyKey]
		if !ok {
			id = fmt.Sprintf("del-%d", len(u.jobs)+1)
			u.jobs[a.IdempotencyKey] = id
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deleted " + a.Filename}}, StructuredContent: map[string]any{"job_id": id}}, nil, nil
	})
	mcp.AddTool(server, &mcp.Tool{Name: "lookup_job"}, func(_ context.Context, _ *mcp.CallToolRequest, a keyArgs) (*mcp.CallToolResult, any, error) {
		u.mu.Lock()
		defer u.mu.Unlock()
		sc := map[string]any{"status": "not_found", "jobs": []any{}}
		if id, ok := u.jobs[a.IdempotencyKey]; ok {
			sc = map[string]any{"status": "completed", "job_id": id, "jobs": []any{map[string]any{"job_id": id, "status": "completed"}}}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "looked up"}}, StructuredContent: sc}, nil, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(srv.Close)
	return u, srv.URL
}

func (u *elicitingUpstream) seen() (jobs int, actions []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.jobs), append([]string(nil), u.actions...)
}

// jobIDs are the IDs of the jobs the provider started, sorted.
func (u *elicitingUpstream) jobIDs() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Sorted(maps.Values(u.jobs))
}

// awaitCallRecorded waits until the worker has recorded what the call of
// opID came back with: a remote job, or a failure.
func awaitCallRecorded(t *testing.T, s ledger.Store, opID string) {
	t.Helper()
	testwait.Until(t, testCtx(t), "the worker to record what the call came back with", func() (bool, error) {
		op := operationOf(t, s, opID)
		for _, k := range []ledger.EventKind{ledger.EventRemoteJobBound, ledger.EventRemoteJobObserved, ledger.EventFailed} {
			if len(eventsOf(t, s, op, k)) > 0 {
				return true, nil
			}
		}
		return false, fmt.Errorf("state %s, nothing recorded of the call yet", op.State)
	})
}

// receiptOf is the receipt of opID as the ledger has it now.
func receiptOf(t *testing.T, s ledger.Store, opID string) *receipt.Receipt {
	t.Helper()
	in, err := receipt.Load(testCtx(t), s, operationOf(t, s, opID), nil)
	if err != nil {
		t.Fatal(err)
	}
	return receipt.Build(in)
}

// checkReceiptAgainstProvider fails unless the receipt of opID lists
// exactly the jobs the provider says it started, and its one question
// with answer.
func checkReceiptAgainstProvider(t *testing.T, s ledger.Store, opID string, started []string, answer receipt.QuestionAnswer) {
	t.Helper()
	// A reconciliation that ran before the call's outcome was recorded
	// could not know it; the one that outcome queued does.
	var r *receipt.Receipt
	testwait.Until(t, testCtx(t), "the receipt to know what the send started", func() (bool, error) {
		r = receiptOf(t, s, opID)
		return r.ReconciliationStatus != receipt.ReconciliationIndeterminate, fmt.Errorf("reconciliation %s, last %+v", r.ReconciliationStatus, r.LastReconciliation)
	})
	listed := []string{}
	for _, j := range r.RemoteJobs {
		listed = append(listed, j.RemoteJobID)
	}
	slices.Sort(listed)
	if started == nil {
		started = []string{}
	}
	if !slices.Equal(listed, started) || r.ObservedRemoteJobs != len(started) {
		t.Fatalf("the receipt lists remote jobs %v (%d observed); the provider started %v", listed, r.ObservedRemoteJobs, started)
	}
	if len(r.Questions) != 1 || r.Questions[0].Answer != answer {
		t.Fatalf("the receipt's questions = %+v; want one, %s", r.Questions, answer)
	}
}

// TestUpstreamElicitationWithinTheCall: a 2025-11-25 upstream's
// elicitation/create during a consequential call reaches the client
// through the task (a 2026-07-28 client in tasks/get, answering with
// tasks/update; a 2025-11-25 client asked on tasks/result); the answer
// goes to the call that waits for it. A decline the upstream answers with
// an error naming no job is a send that started nothing: the receipt lists
// only the jobs the provider started, and says the question was declined.
func TestUpstreamElicitationWithinTheCall(t *testing.T) {
	accept := &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}
	for _, tt := range []struct {
		name   string
		era    fixtures.Era
		answer *mcp.ElicitResult
		status taskwire.Status
		jobs   int
	}{
		{"2026-07-28 accepted", fixtures.EraExtension, accept, taskwire.StatusCompleted, 1},
		{"2026-07-28 declined", fixtures.EraExtension, &mcp.ElicitResult{Action: "decline"}, taskwire.StatusCancelled, 0},
		{"2026-07-28 cancelled by the user", fixtures.EraExtension, &mcp.ElicitResult{Action: "cancel"}, taskwire.StatusCancelled, 0},
		{"2025-11-25 accepted", fixtures.EraLegacy, accept, taskwire.StatusCompleted, 1},
		{"2025-11-25 declined", fixtures.EraLegacy, &mcp.ElicitResult{Action: "decline"}, taskwire.StatusCancelled, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up, upURL := newElicitingUpstream(t)
			g := startInputGateway(t, upURL, "sqlite:"+filepath.Join(t.TempDir(), "taskgate.db"), nil)
			ctx := testCtx(t)
			var cs *mcp.ClientSession
			var legacyAsked []*mcp.ElicitParams
			if tt.era == fixtures.EraLegacy {
				cs = legacyElicitingClient(t, g, tt.answer, &legacyAsked)
			} else {
				cs = g.connect(t, tt.era)
			}
			task := askedTaskOf(t, cs, deleteCall("op-elicit"))
			if tt.era == fixtures.EraLegacy {
				res, err := taskwire.TaskResult(ctx, cs, task.ID)
				if tt.status == taskwire.StatusCompleted && (err != nil || fixtures.ResultText(res) != "deleted report.txt") {
					t.Fatalf("tasks/result = %s, %v; want deleted report.txt", fixtures.ResultText(res), err)
				}
				if tt.status == taskwire.StatusCancelled && err == nil {
					t.Fatalf("tasks/result of a declined question = %s; want an error", fixtures.ResultText(res))
				}
				if len(legacyAsked) != 1 || legacyAsked[0].Message != "Delete report.txt?" {
					t.Fatalf("the client was asked %+v; want the upstream's question once", legacyAsked)
				}
			} else {
				if len(task.InputRequests) != 1 {
					t.Fatalf("task has %d input requests; want one", len(task.InputRequests))
				}
				var key string
				for k := range task.InputRequests {
					key = k
				}
				if q := question(t, task, key); q.Message != "Delete report.txt?" {
					t.Fatalf("question = %q", q.Message)
				}
				raw, err := json.Marshal(tt.answer)
				if err != nil {
					t.Fatal(err)
				}
				answerTask(t, cs, task.ID, key, string(raw))
			}
			done := awaitTask(t, cs, task.ID)
			if done.Status != tt.status {
				t.Fatalf("task = %s (%s), want %s", done.Status, done.StatusMessage, tt.status)
			}
			testwait.Until(t, ctx, "the upstream to get the answer", func() (bool, error) {
				jobs, actions := up.seen()
				return len(actions) == 1, fmt.Errorf("%d jobs, actions %v", jobs, actions)
			})
			if jobs, actions := up.seen(); jobs != tt.jobs || actions[0] != tt.answer.Action {
				t.Fatalf("upstream: %d jobs, actions %v; want %d jobs and the answer's action %s", jobs, actions, tt.jobs, tt.answer.Action)
			}
			awaitCallRecorded(t, g.store, "op-elicit")
			op := operationOf(t, g.store, "op-elicit")
			requested := eventsOf(t, g.store, op, ledger.EventInputRequested)
			if d, err := ledger.DecodeEventData[ledger.InputRequestedData](requested[0]); err != nil || !d.InFlight || op.SendCount != 1 {
				t.Fatalf("input_requested = %+v, %v, send count %d; want one in flight and one send", d, err, op.SendCount)
			}
			answer := receipt.QuestionAnswered
			if tt.status == taskwire.StatusCancelled {
				answer = receipt.QuestionDeclined
				if op.State != ledger.StateCancelled || !strings.Contains(op.StatusMessage, tt.answer.Action) {
					t.Fatalf("operation %s (%s); want cancelled, saying %s", op.State, op.StatusMessage, tt.answer.Action)
				}
			}
			checkReceiptAgainstProvider(t, g.store, "op-elicit", up.jobIDs(), answer)
		})
	}
}

// TestTaskCancelledWhileTheCallAsks: a task cancelled while its upstream's
// question waits within the call tells the upstream "cancel"; that is not
// the user's answer, so what the upstream answers is kept as the send's
// outcome, even an error naming no job: only the provider knows whether
// the call did anything.
func TestTaskCancelledWhileTheCallAsks(t *testing.T) {
	up, upURL := newElicitingUpstream(t)
	g := startInputGateway(t, upURL, "sqlite:"+filepath.Join(t.TempDir(), "taskgate.db"), nil)
	cs := g.connect(t, fixtures.EraExtension)
	ctx := testCtx(t)
	task, _, err := taskwire.CallToolAsTask(ctx, cs, deleteCall("op-cancel-asking"), nil)
	if err != nil || task == nil {
		t.Fatalf("tools/call = %v, %v; want a task", task, err)
	}
	if asked := awaitTask(t, cs, task.ID); asked.Status != taskwire.StatusInputRequired {
		t.Fatalf("task = %s (%s), want input_required", asked.Status, asked.StatusMessage)
	}
	if _, err := taskwire.CancelTask(ctx, cs, task.ID); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, ctx, "the upstream to be told", func() (bool, error) {
		_, actions := up.seen()
		return len(actions) == 1, fmt.Errorf("actions %v", actions)
	})
	if _, actions := up.seen(); actions[0] != "cancel" {
		t.Fatalf("the upstream was told %v; want cancel", actions)
	}
	awaitCallRecorded(t, g.store, "op-cancel-asking")
	op := operationOf(t, g.store, "op-cancel-asking")
	jobs, err := g.store.RemoteJobList(ctx, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || !strings.Contains(string(jobs[0].Result), "the deletion was not confirmed") {
		t.Fatalf("remote jobs = %+v; want the call's one, with the upstream's result", jobs)
	}
	if ev := eventsOf(t, g.store, op, ledger.EventInputDeclined); len(ev) != 0 {
		t.Fatalf("%d input_declined events; want none: the user did not answer", len(ev))
	}
}

// TestUpstreamElicitationLostOnRestart: a question asked within a call
// dies with the gateway that held the call, so after the restart the
// operation waits for a human, with a reason that says so, and nothing is
// re-sent.
func TestUpstreamElicitationLostOnRestart(t *testing.T) {
	up, upURL := newElicitingUpstream(t)
	db := "sqlite:" + filepath.Join(t.TempDir(), "taskgate.db")
	g := startInputGateway(t, upURL, db, nil)
	cs := g.connect(t, fixtures.EraExtension)
	task, _, err := taskwire.CallToolAsTask(testCtx(t), cs, deleteCall("op-lost"), nil)
	if err != nil || task == nil {
		t.Fatalf("tools/call = %v, %v; want a task", task, err)
	}
	if asked := awaitTask(t, cs, task.ID); asked.Status != taskwire.StatusInputRequired {
		t.Fatalf("task = %s (%s), want input_required", asked.Status, asked.StatusMessage)
	}
	g.stop()

	g2 := startInputGateway(t, upURL, db, nil)
	testwait.Until(t, testCtx(t), "the operation to wait for a human", func() (bool, error) {
		op := operationOf(t, g2.store, "op-lost")
		return op.State == ledger.StateReview && op.ReviewReason == ledger.ReasonUpstreamInputLost, fmt.Errorf("state %s (%s): %s", op.State, op.ReviewReason, op.StatusMessage)
	})
	cs2 := g2.connect(t, fixtures.EraExtension)
	if got, err := taskwire.GetTask(testCtx(t), cs2, task.ID); err != nil || got.Status != taskwire.StatusWorking || !strings.Contains(got.StatusMessage, ledger.ReasonUpstreamInputLost) {
		t.Fatalf("task after the restart = %+v, %v; want working, waiting for a human (%s)", got, err, ledger.ReasonUpstreamInputLost)
	}
	if jobs, _ := up.seen(); jobs != 0 {
		t.Fatalf("upstream jobs = %d, want 0", jobs)
	}
	if op := operationOf(t, g2.store, "op-lost"); op.SendCount != 1 {
		t.Fatalf("send count = %d, want 1: nothing re-sent", op.SendCount)
	}
}

// TestCrashBetweenRoundsLooksUpFirst: a gateway that goes away while the
// answer's send is in flight (the provider started the job, the answer was
// lost) recovers it as any uncertain send: it looks the operation up and
// attaches to the job the answer started, sending nothing again.
func TestCrashBetweenRoundsLooksUpFirst(t *testing.T) {
	up, upURL := newConfirmUpstream(t)
	up.hold, up.entered = make(chan struct{}), make(chan struct{})
	db := "sqlite:" + filepath.Join(t.TempDir(), "taskgate.db")
	g := startInputGateway(t, upURL, db, nil)
	cs := g.connect(t, fixtures.EraExtension)
	task := askedTask(t, cs, "op-between")
	answerTask(t, cs, task.ID, "confirm", `{"action":"accept","content":{"confirm":true}}`)
	ectx, cancel := context.WithTimeout(testCtx(t), 15*time.Second)
	defer cancel()
	select {
	case <-up.entered:
	case <-ectx.Done():
		t.Fatal("the answer's send never reached the upstream")
	}
	g.stop()
	close(up.hold)

	g2 := startInputGateway(t, upURL, db, nil)
	cs2 := g2.connect(t, fixtures.EraExtension)
	done := awaitTask(t, cs2, task.ID)
	if done.Status != taskwire.StatusCompleted {
		t.Fatalf("task = %s (%s), want completed", done.Status, done.StatusMessage)
	}
	if jobs, asked, answered, bad := up.counts(); jobs != 1 || asked != 1 || answered != 1 || bad != 0 {
		t.Fatalf("upstream saw %d jobs, %d questions, %d answers, %d bad states; want 1, 1, 1, 0: nothing sent again", jobs, asked, answered, bad)
	}
	op := operationOf(t, g2.store, "op-between")
	lookups := eventsOf(t, g2.store, op, ledger.EventLookup)
	if len(lookups) != 1 || op.SendCount != 2 {
		t.Fatalf("%d lookups, send count %d; want the one lookup that found the job, and no third send", len(lookups), op.SendCount)
	}
	if d, err := ledger.DecodeEventData[ledger.LookupData](lookups[0]); err != nil || d.Answer != "completed" || d.RemoteJobID == nil || *d.RemoteJobID != "del-1" {
		t.Fatalf("lookup = %+v, %v; want completed del-1", d, err)
	}
}

// TestQuestionAskedAgainGetsANewKey: an upstream that asks again under a
// key it used before gets the answer under its own key, while the client
// sees a key it was never asked under (keys never repeat in a task's life).
func TestQuestionAskedAgainGetsANewKey(t *testing.T) {
	up, upURL := newConfirmUpstream(t)
	up.askTwice = true
	g := startInputGateway(t, upURL, "sqlite:"+filepath.Join(t.TempDir(), "taskgate.db"), nil)
	cs := g.connect(t, fixtures.EraExtension)
	task := askedTask(t, cs, "op-twice")
	answerTask(t, cs, task.ID, "confirm", `{"action":"accept","content":{"confirm":true}}`)
	again := awaitTask(t, cs, task.ID)
	if again.Status != taskwire.StatusInputRequired || len(again.InputRequests) != 1 || again.InputRequests["confirm"] != nil {
		t.Fatalf("second question: %s with %v; want input_required under a new key", again.Status, again.InputRequests)
	}
	var key string
	for k := range again.InputRequests {
		key = k
	}
	if q := question(t, again, key); q.Message != "Really delete report.txt?" {
		t.Fatalf("second question = %q", q.Message)
	}
	answerTask(t, cs, task.ID, "confirm", `{"action":"decline"}`) // no longer outstanding: ignored
	answerTask(t, cs, task.ID, key, `{"action":"accept","content":{"confirm":true}}`)
	if done := awaitTask(t, cs, task.ID); done.Status != taskwire.StatusCompleted {
		t.Fatalf("task = %s (%s), want completed", done.Status, done.StatusMessage)
	}
	if jobs, asked, answered, bad := up.counts(); jobs != 1 || asked != 1 || answered != 2 || bad != 0 {
		t.Fatalf("upstream saw %d jobs, %d first rounds, %d answers, %d bad states; want 1, 1, 2, 0", jobs, asked, answered, bad)
	}
}
