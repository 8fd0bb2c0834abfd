package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/canon"
	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/daemon"
	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/dburl"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
	"github.com/taskgate/taskgate/taskwire"
)

// gateway is a daemon in front of a simulated provider, with the daemon
// itself at hand (the harness hides it).
type gateway struct {
	d     *daemon.Daemon
	sim   *providersim.Sim
	store ledger.Store
	url   string
	key   string
	// stopped is set once the test stopped the daemon itself.
	stopped bool
}

// gatewayOptions shape startGateway's gateway.
type gatewayOptions struct {
	sim providersim.Options
	// yaml edits the harness's configuration text.
	yaml func(string) string
	// store wraps the ledger the daemon uses.
	store func(ledger.Store) ledger.Store
	// logger, when set, is the daemon's logger.
	logger *slog.Logger
}

func startGateway(t *testing.T, o gatewayOptions) *gateway {
	t.Helper()
	ctx := testCtx(t)
	sim := providersim.New(&o.sim)
	t.Cleanup(func() { sim.Close() })
	srv := httptest.NewServer(sim.HTTPHandler())
	t.Cleanup(srv.Close)
	db := "sqlite:" + filepath.Join(t.TempDir(), "taskgate.db")
	y := fixtures.ConfigYAML(srv.URL+"/mcp", "127.0.0.1:0", db, fixtures.ConfigOptions{})
	if o.yaml != nil {
		y = o.yaml(y)
	}
	cfg, err := config.Parse(strings.NewReader(y), "gateway.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	store, err := dburl.Open(ctx, db, &dburl.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	used := store
	if o.store != nil {
		used = o.store(store)
	}
	d, err := daemon.Start(ctx, &daemon.Options{Config: cfg, Store: used, Logger: o.logger})
	if err != nil {
		t.Fatal(err)
	}
	g := &gateway{d: d, sim: sim, store: store, url: d.URL + "/mcp"}
	t.Cleanup(func() {
		if !g.stopped {
			d.Stop(context.Background())
		}
	})
	if g.key, _, err = authn.NewAPIKey(ctx, store, "acme", "test"); err != nil {
		t.Fatal(err)
	}
	return g
}

func (g *gateway) connect(t *testing.T, era fixtures.Era) *mcp.ClientSession {
	t.Helper()
	cs, err := fixtures.Dial(testCtx(t), g.url, g.key, era, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// connectWithoutStream opens a 2025-11-25 session (with tasks when tasks
// is set) that opens no standalone stream: a client that only makes
// requests, and gives up rather than retrying.
func (g *gateway) connectWithoutStream(t *testing.T, tasks bool) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "no-stream"}, nil)
	var transport mcp.Transport = &mcp.StreamableClientTransport{
		Endpoint: g.url, MaxRetries: -1, DisableStandaloneSSE: true,
		HTTPClient: &http.Client{Transport: fixtures.Bearer{Key: g.key}},
	}
	if tasks {
		if err := taskwire.InstallClient(client); err != nil {
			t.Fatal(err)
		}
		transport = taskwire.WrapClientTransport(transport)
	}
	cs, err := client.Connect(testCtx(t), transport, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestRunningTasksDoNotExpire: the TTL counts from a task's end. A task
// that runs longer than its TTL stays readable and cancellable, its ttl
// unlimited (null) while it runs; an ended one is kept for the TTL, then
// expires.
//
// The ended task must be read within its TTL of its end, so the TTL leaves
// a loaded machine a second for it; the jobs run twice as long as the
// sleep below.
func TestRunningTasksDoNotExpire(t *testing.T) {
	const ttl = time.Second
	g := startGateway(t, gatewayOptions{
		sim: providersim.Options{JobDuration: 4 * ttl},
		yaml: func(y string) string {
			return strings.Replace(y, "poll_interval: 100ms", "poll_interval: 100ms\ntask_ttl: 1s", 1)
		},
	})
	ctx := testCtx(t)
	modern, legacy := g.connect(t, fixtures.EraExtension), g.connect(t, fixtures.EraLegacy)
	long, _, err := taskwire.CallToolAsTask(ctx, modern, fixtures.RunSuiteCall("op-long", nil), nil)
	if err != nil || long == nil {
		t.Fatalf("tools/call = %v, %v", long, err)
	}
	doomed, _, err := taskwire.CallToolAsTask(ctx, legacy, fixtures.RunSuiteCall("op-doomed", nil), nil)
	if err != nil || doomed == nil {
		t.Fatalf("tools/call = %v, %v", doomed, err)
	}
	// Time passing is the scenario here: both tasks run on past their
	// TTL, and no event marks that, so the test sleeps through it.
	time.Sleep(2 * ttl)

	got, err := taskwire.GetTask(ctx, modern, long.ID)
	if err != nil || got.Status != taskwire.StatusWorking {
		t.Fatalf("tasks/get of a task running past its TTL = %+v, %v; want it working", got, err)
	}
	if got.TTL != nil {
		t.Errorf("a running task advertises ttl %v, %v after creation; want unlimited (null) until it ends", *got.TTL, time.Since(got.CreatedAt))
	}
	if cancelled, err := taskwire.CancelTask(ctx, legacy, doomed.ID); err != nil || cancelled.Status != taskwire.StatusCancelled {
		t.Fatalf("tasks/cancel of a task running past its TTL = %+v, %v; want it cancelled", cancelled, err)
	}

	// Seeing the task completed is reading it after its end: it is kept
	// for its TTL.
	done := awaitTask(t, modern, long.ID)
	if done.Status != taskwire.StatusCompleted {
		t.Fatalf("task ended %s", done.Status)
	}
	testwait.Until(t, ctx, "the ended task expires once its TTL has passed", func() (bool, error) {
		_, err := taskwire.GetTask(ctx, modern, long.ID)
		var werr *jsonrpc.Error
		return errors.As(err, &werr) && werr.Code == jsonrpc.CodeInvalidParams && strings.Contains(werr.Message, "expired"), nil
	})
}

// finishingStore is the real ledger, except that one chosen read of an
// operation by task ID is followed by the operation ending — the worker
// finishing just after a handler looked — and answers what it read before.
type finishingStore struct {
	ledger.Store
	reads  atomic.Int32
	fireAt atomic.Int32 // the read (1-based) after which the operation ends; 0: none
}

func (s *finishingStore) OperationGet(ctx context.Context, p *ledger.OperationGetParams) (*ledger.Operation, error) {
	op, err := s.Store.OperationGet(ctx, p)
	if err != nil || p.TaskID == "" || op.State.Terminal() {
		return op, err
	}
	if n := s.reads.Add(1); n == s.fireAt.Load() {
		// A worker finishes through "send started"; the gateway's own may
		// have got there first. Holding the lease keeps that worker from
		// taking up a send it did not start, which it would look up and
		// send to review.
		if _, err := s.Store.Transition(ctx, &ledger.TransitionParams{
			OperationRef: op.ID, From: []ledger.State{ledger.StateAccepted}, To: ledger.StateSending,
			Lease: &ledger.Lease{Owner: "finishing-store", Until: time.Now().Add(time.Hour)},
		}); err != nil && !errors.Is(err, ledger.ErrStateChanged) {
			return nil, err
		}
		msg := "finished just after the read"
		if _, err := s.Store.Transition(ctx, &ledger.TransitionParams{
			OperationRef: op.ID, To: ledger.StateCompleted, StatusMessage: &msg, Lease: &ledger.Lease{},
			Result: json.RawMessage(`{"content":[{"type":"text","text":"finished first"}]}`),
		}); err != nil {
			return nil, err
		}
	}
	return op, nil
}

// TestCancelRacingCompletion: a cancellation that loses the race with the
// operation's end is recorded, the operation keeps its end, and the client
// hears what its era prescribes for a task that ended — never -32603.
func TestCancelRacingCompletion(t *testing.T) {
	for _, tt := range []struct {
		era    fixtures.Era
		fireAt int32 // legacy tasks/cancel reads the task twice
	}{{fixtures.EraExtension, 1}, {fixtures.EraLegacy, 2}} {
		t.Run(string(tt.era), func(t *testing.T) {
			fs := &finishingStore{}
			g := startGateway(t, gatewayOptions{
				sim:   providersim.Options{JobDuration: 30 * time.Second},
				store: func(s ledger.Store) ledger.Store { fs.Store = s; return fs },
			})
			ctx := testCtx(t)
			cs := g.connect(t, tt.era)
			task, _, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall("op-race", nil), nil)
			if err != nil || task == nil {
				t.Fatalf("tools/call = %v, %v", task, err)
			}
			fs.reads.Store(0)
			fs.fireAt.Store(tt.fireAt)
			_, err = taskwire.CancelTask(ctx, cs, task.ID)
			var werr *jsonrpc.Error
			switch tt.era {
			case fixtures.EraExtension:
				if err != nil {
					t.Fatalf("tasks/cancel = %v; want the acknowledgement", err)
				}
			case fixtures.EraLegacy:
				if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(werr.Message, "completed") {
					t.Fatalf("tasks/cancel = %v; want -32602 for a task already completed", err)
				}
			}
			op, err := g.store.OperationGet(ctx, &ledger.OperationGetParams{Tenant: "acme", TaskID: task.ID})
			if err != nil || op.State != ledger.StateCompleted || op.CancelRequestedAt.IsZero() {
				t.Fatalf("operation = %+v, %v; want completed with the cancellation request recorded", op, err)
			}
			events, err := g.store.EventList(ctx, op.ID)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, e := range events {
				found = found || e.Kind == ledger.EventCancellationRequested && strings.Contains(string(e.Data), `"state":"completed"`)
			}
			if !found {
				t.Errorf("events lack a cancellation request against the completed operation")
			}
		})
	}
}

// rawSession opens a 2025-11-25 session over plain HTTP, as a client that
// can vanish without a word would, and returns its ID.
func rawSession(t *testing.T, g *gateway) string {
	t.Helper()
	resp := rawPost(testCtx(t), g, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"vanishing","version":"0"}}}`)
	id := resp.Header.Get("Mcp-Session-Id")
	if id == "" {
		t.Fatalf("initialize answered %d without a session", resp.StatusCode)
	}
	rawPost(testCtx(t), g, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return id
}

// rawPost posts one message to the gateway; a request that fails answers
// status 0.
func rawPost(ctx context.Context, g *gateway, session, body string) *http.Response {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.url, strings.NewReader(body))
	if err != nil {
		return &http.Response{StatusCode: 0, Header: http.Header{}, Body: http.NoBody}
	}
	req.Header.Set("Authorization", "Bearer "+g.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return &http.Response{StatusCode: 0, Header: http.Header{}, Body: http.NoBody}
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// attemptOf returns the first attempt of acme's operation, or nil.
func attemptOf(t *testing.T, g *gateway, opID string) *ledger.Attempt {
	t.Helper()
	op, err := g.store.OperationGet(testCtx(t), &ledger.OperationGetParams{Tenant: "acme", OperationID: opID})
	if errors.Is(err, ledger.ErrNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	attempts, err := g.store.AttemptList(testCtx(t), op.ID)
	if err != nil || len(attempts) == 0 {
		return nil
	}
	return attempts[0]
}

// TestWaitEndsWhenTheClientVanishes: a client without tasks that drops its
// connection mid-wait — no cancellation, no goodbye — is recorded as gone
// at once; the gateway does not wait out the operation for nobody.
func TestWaitEndsWhenTheClientVanishes(t *testing.T) {
	g := startGateway(t, gatewayOptions{sim: providersim.Options{JobDuration: 30 * time.Second}})
	session := rawSession(t, g)
	ctx, vanish := context.WithCancel(testCtx(t))
	go rawPost(ctx, g, session, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"`+fixtures.RunSuiteTool+`","arguments":{"suite":"x","operation_id":"op-vanish"}}}`)
	testwait.Until(t, testCtx(t), "the call is accepted", func() (bool, error) { return attemptOf(t, g, "op-vanish") != nil, nil })
	vanish()
	testwait.Until(t, testCtx(t), "the attempt is recorded as disconnected", func() (bool, error) {
		return attemptOf(t, g, "op-vanish").ClientResult == ledger.ClientDisconnected, nil
	})
}

// TestShutdownEndsWaits: stopping the gateway answers the waits in flight —
// a client without tasks hears the operation still runs, a 2025-11-25
// tasks/result that the gateway is shutting down — instead of holding the
// shutdown until they end.
func TestShutdownEndsWaits(t *testing.T) {
	g := startGateway(t, gatewayOptions{sim: providersim.Options{JobDuration: 60 * time.Second}})
	ctx := testCtx(t)
	legacy := g.connectWithoutStream(t, true)
	task, _, err := taskwire.CallToolAsTask(ctx, legacy, fixtures.RunSuiteCall("op-result", nil), nil)
	if err != nil || task == nil {
		t.Fatalf("tools/call = %v, %v", task, err)
	}
	resultErr := make(chan error, 1)
	go func() {
		_, err := taskwire.TaskResult(ctx, legacy, task.ID)
		resultErr <- err
	}()
	testwait.Until(t, ctx, "tasks/result is being handled", func() (bool, error) {
		dctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		return g.d.Gateway.Drain(dctx) != nil, nil
	})
	plain := g.connectWithoutStream(t, false)
	plainRes := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, _ := plain.CallTool(ctx, fixtures.RunSuiteCall("op-await", nil))
		plainRes <- res
	}()
	testwait.Until(t, ctx, "the plain call waits", func() (bool, error) { return attemptOf(t, g, "op-await") != nil, nil })

	g.stopped = true
	if err := g.d.Stop(ctx); err != nil {
		t.Fatalf("Stop = %v; want a clean stop", err)
	}
	var werr *jsonrpc.Error
	if err := <-resultErr; !errors.As(err, &werr) || !strings.Contains(werr.Message, "shutting down") {
		t.Errorf("tasks/result during shutdown = %v; want an error saying the gateway is shutting down", err)
	}
	res := <-plainRes
	if res == nil || !strings.Contains(fixtures.ResultText(res), "still running") {
		t.Errorf("plain call during shutdown = %+v; want the answer that the operation still runs", res)
	}
}

// TestShutdownEndsStandaloneStreams: a 2025-11-25 session's standalone
// stream, open for as long as its session, ends when the gateway stops
// instead of holding the listener to its 10 s grace period.
func TestShutdownEndsStandaloneStreams(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	ctx := testCtx(t)
	// The client opens its stream after initializing: wait until the
	// gateway has answered its GET.
	opened := make(chan struct{}, 1)
	cs, err := fixtures.Dial(ctx, g.url, g.key, fixtures.EraLegacy, &http.Client{Transport: streamOpened{next: http.DefaultTransport, opened: opened}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	awaitSignal(t, opened, "the client's standalone stream never opened")
	g.stopped = true
	stopped := make(chan error, 1)
	go func() { stopped <- g.d.Stop(ctx) }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Stop = %v; want a clean stop", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Stop still waiting 5s later: the session's standalone stream holds the listener")
	}
}

// streamOpened signals opened once a standalone stream's GET is answered
// 200.
type streamOpened struct {
	next   http.RoundTripper
	opened chan<- struct{}
}

func (s streamOpened) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := s.next.RoundTrip(req)
	if err == nil && req.Method == http.MethodGet && resp.StatusCode == http.StatusOK {
		select {
		case s.opened <- struct{}{}:
		default:
		}
	}
	return resp, err
}

// countingStore counts reads of operations by row ID: the reads a wait
// for an operation's end polls with.
type countingStore struct {
	ledger.Store
	reads atomic.Int32
}

func (s *countingStore) OperationGet(ctx context.Context, p *ledger.OperationGetParams) (*ledger.Operation, error) {
	if p.ID != 0 {
		s.reads.Add(1)
	}
	return s.Store.OperationGet(ctx, p)
}

// TestAwaitBacksOff: a client without tasks waiting for a long operation
// costs the ledger a read per poll interval, not ten a second.
func TestAwaitBacksOff(t *testing.T) {
	cs := &countingStore{}
	g := startGateway(t, gatewayOptions{
		sim:   providersim.Options{JobDuration: 3 * time.Second},
		yaml:  func(y string) string { return strings.Replace(y, "poll_interval: 100ms", "poll_interval: 1s", 1) },
		store: func(s ledger.Store) ledger.Store { cs.Store = s; return cs },
	})
	plain := g.connectWithoutStream(t, false)
	start := time.Now()
	res, err := plain.CallTool(testCtx(t), fixtures.RunSuiteCall("op-patient", nil))
	if err != nil || res.IsError {
		t.Fatalf("tools/call = %+v, %v", res, err)
	}
	elapsed := time.Since(start)
	// Backing off to the 1s poll interval reads about once a second after
	// a few quick reads; polling every 100ms would read ten times as often.
	if reads, most := cs.reads.Load(), int32(elapsed/(400*time.Millisecond))+6; reads > most {
		t.Errorf("a wait of %v read the operation %d times; want at most %d", elapsed.Round(time.Millisecond), reads, most)
	}
}

// TestTasksListPagesByTaskID: tasks/list pages through the caller's own
// tasks with the last task ID of a page as the cursor; another tenant's
// task ID is no cursor.
func TestTasksListPagesByTaskID(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	ctx := testCtx(t)
	accept := func(tenant, opID string) *ledger.Operation {
		t.Helper()
		fp, err := canon.Compute("hosted_test", "run_suite", json.RawMessage(`{"suite":"x"}`))
		if err != nil {
			t.Fatal(err)
		}
		res, err := g.store.Accept(ctx, &ledger.AcceptParams{
			Tenant: tenant, OperationID: opID, Upstream: "hosted_test", Tool: "run_suite", Fingerprint: string(fp),
			Arguments: json.RawMessage(`{"suite":"x"}`), RequestID: ledger.NewRequestID(), TaskID: ledger.NewTaskID(),
		})
		if err != nil {
			t.Fatal(err)
		}
		return res.Operation
	}
	const n = 51 // a page holds 50
	want := map[string]bool{}
	for i := range n {
		want[accept("acme", fmt.Sprintf("op-%d", i)).TaskID] = true
	}
	other := accept("globex", "op-other")

	cs := g.connect(t, fixtures.EraLegacy)
	seen := map[string]bool{}
	cursor, pages := "", 0
	for {
		tasks, next, err := taskwire.ListTasks(ctx, cs, cursor)
		if err != nil {
			t.Fatalf("tasks/list page %d: %v", pages+1, err)
		}
		pages++
		for _, task := range tasks {
			if seen[task.ID] || !want[task.ID] {
				t.Fatalf("tasks/list returned %s twice or not acme's", task.ID)
			}
			seen[task.ID] = true
		}
		if next == "" {
			break
		}
		if next != tasks[len(tasks)-1].ID {
			t.Fatalf("cursor %q, want the page's last task ID %q", next, tasks[len(tasks)-1].ID)
		}
		cursor = next
	}
	if len(seen) != n || pages != 2 {
		t.Fatalf("tasks/list gave %d tasks in %d pages, want %d in 2", len(seen), pages, n)
	}
	for _, bad := range []string{other.TaskID, "task-unknown", "12"} {
		if _, _, err := taskwire.ListTasks(ctx, cs, bad); err == nil {
			t.Errorf("tasks/list with cursor %q succeeded; want invalid params", bad)
		}
	}
}
