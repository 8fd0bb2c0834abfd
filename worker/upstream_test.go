package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/daemon"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/dburl"
	"github.com/taskgate/taskgate/sim/fixtures"
)

// gateway is a real taskgate daemon, in this process, in front of any
// upstream URL, configured like the fixtures harness (upstream hosted_test
// with run_suite consequential and the hosted_test provider contract).
type gateway struct {
	Store ledger.Store
	url   string
	key   string
	d     *daemon.Daemon
}

// gatewaySetup varies a gateway beyond fixtures.ConfigOptions.
type gatewaySetup struct {
	// edit rewrites the configuration's YAML.
	edit []func(t *testing.T, y string) string
	// wrap wraps the store the gateway runs on; the test reads the store
	// underneath.
	wrap func(ledger.Store) ledger.Store
}

// withConfig rewrites the gateway's configuration YAML.
func withConfig(edit func(t *testing.T, y string) string) func(*gatewaySetup) {
	return func(s *gatewaySetup) { s.edit = append(s.edit, edit) }
}

// withStore runs the gateway on a wrapper of its ledger store.
func withStore(wrap func(ledger.Store) ledger.Store) func(*gatewaySetup) {
	return func(s *gatewaySetup) { s.wrap = wrap }
}

func startGateway(t *testing.T, upstreamURL string, o fixtures.ConfigOptions, setup ...func(*gatewaySetup)) *gateway {
	t.Helper()
	var gs gatewaySetup
	for _, f := range setup {
		f(&gs)
	}
	ctx := testCtx(t, 30*time.Second)
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "taskgate.db")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	y := fixtures.ConfigYAML(upstreamURL, ln.Addr().String(), db, o)
	for _, edit := range gs.edit {
		y = edit(t, y)
	}
	cfg, err := config.Parse(strings.NewReader(y), filepath.Join(dir, "taskgate.yaml"), nil)
	if err != nil {
		ln.Close()
		t.Fatalf("gateway configuration: %v", err)
	}
	g := &gateway{url: "http://" + ln.Addr().String() + "/mcp"}
	if g.Store, err = dburl.Open(ctx, db, &dburl.Options{Migrate: true}); err != nil {
		ln.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Store.Close() })
	if g.key, _, err = authn.NewAPIKey(ctx, g.Store, tenant, "test"); err != nil {
		ln.Close()
		t.Fatal(err)
	}
	var store ledger.Store
	if gs.wrap != nil {
		store = gs.wrap(g.Store)
	}
	if g.d, err = daemon.Start(ctx, &daemon.Options{Config: cfg, Store: store, Listener: ln, ToolSync: time.Second}); err != nil {
		ln.Close()
		t.Fatalf("start the gateway: %v", err)
	}
	t.Cleanup(func() { g.stop(t) })
	return g
}

// stop stops the gateway gracefully: it waits for the work in hand, so
// that afterwards nothing reaches the upstream any more.
func (g *gateway) stop(t *testing.T) {
	t.Helper()
	if g.d == nil {
		return
	}
	closeIdleClients()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := g.d.Stop(ctx); err != nil {
		t.Errorf("stop the gateway: %v", err)
	}
	g.d = nil
}

func (g *gateway) connect(t *testing.T, ctx context.Context, era fixtures.Era) *mcp.ClientSession {
	t.Helper()
	cs, err := fixtures.Dial(ctx, g.url, g.key, era, nil)
	if err != nil {
		t.Fatalf("connect (%s): %v", era, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// settle makes the consequential call as opID from a tasks client, waits
// until the operation ends or needs review, and stops the gateway: stopping
// waits for the work in hand, so that afterwards nothing can reach the
// upstream and its counts are final.
func (g *gateway) settle(t *testing.T, ctx context.Context, opID string) *ledger.Operation {
	t.Helper()
	logHistory(t, g.Store, opID)
	cs := g.connect(t, ctx, fixtures.EraExtension)
	startTask(t, ctx, cs, opID)
	op := awaitOperation(t, ctx, g.Store, opID, endedOrReview)
	g.stop(t)
	return op
}

// callCounter counts the tools/call requests an MCP server receives, by
// tool name, as the server itself sees them on the wire.
type callCounter struct {
	next  http.Handler
	mu    sync.Mutex
	calls map[string]int
}

func countCalls(next http.Handler) *callCounter {
	return &callCounter{next: next, calls: map[string]int{}}
}

func (c *callCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &msg) == nil && msg.Method == "tools/call" {
			c.mu.Lock()
			c.calls[msg.Params.Name]++
			c.mu.Unlock()
		}
	}
	c.next.ServeHTTP(w, r)
}

func (c *callCounter) count(tool string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[tool]
}

// providerScript is what a scripted provider answers.
type providerScript struct {
	// lookupStatus is what lookup_operation answers; lookupFails makes it
	// answer an error instead.
	lookupStatus string
	lookupFails  bool
	// jobStatus is what get_job answers for the job.
	jobStatus string
	// answerFrom is the first run_suite call (counting from 1) that is
	// answered; earlier calls, and all calls when it is 0, never are: the
	// provider accepted nothing, but the caller hears nothing either.
	answerFrom int
	// lookupNoJobID makes lookup_operation answer its status without
	// naming the job.
	lookupNoJobID bool
	// getJobFails makes get_job answer an error.
	getJobFails bool
	// runSuiteError, when set, is the JSON-RPC error every run_suite call
	// is answered with at once.
	runSuiteError *jsonrpc.Error
}

// scriptedProvider is a real MCP server, served over HTTP, that speaks the
// hosted_test provider contract (run_suite, lookup_operation, get_job,
// list_charges) with answers a test chooses, so that every lookup answer
// can be produced on demand. It keeps its own record of the calls it got.
type scriptedProvider struct {
	providerScript
	url        string
	counter    *callCounter
	release    chan struct{}
	mu         sync.Mutex
	keys       []string // of run_suite calls
	lookupKeys []string // of lookup_operation calls
}

// scriptedJob is the one job the scripted provider talks about.
const scriptedJob = "job-7"

func startScripted(t *testing.T, script providerScript) *scriptedProvider {
	t.Helper()
	p := &scriptedProvider{providerScript: script}
	server := mcp.NewServer(&mcp.Implementation{Name: "hosted_test", Version: "1.0.0"}, nil)
	object := json.RawMessage(`{"type":"object"}`)
	server.AddTool(&mcp.Tool{Name: "run_suite", InputSchema: object}, p.runSuite)
	server.AddTool(&mcp.Tool{Name: "lookup_operation", InputSchema: object}, p.lookup)
	server.AddTool(&mcp.Tool{Name: "get_job", InputSchema: object}, p.getJob)
	server.AddTool(&mcp.Tool{Name: "list_charges", InputSchema: object}, p.listCharges)
	p.release = make(chan struct{})
	p.counter = countCalls(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	srv := httptest.NewServer(p.counter)
	p.url = srv.URL + "/mcp"
	t.Cleanup(func() {
		close(p.release)
		srv.CloseClientConnections()
		srv.Close()
	})
	return p
}

func (p *scriptedProvider) runSuite(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		Suite string `json:"suite"`
		Key   string `json:"idempotency_key"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.keys = append(p.keys, args.Key)
	n := len(p.keys)
	p.mu.Unlock()
	if p.runSuiteError != nil {
		return nil, p.runSuiteError
	}
	if p.answerFrom == 0 || n < p.answerFrom {
		select {
		case <-ctx.Done():
		case <-p.release:
		}
		return nil, fmt.Errorf("call %d of run_suite was never answered", n)
	}
	return structured(map[string]any{"job_id": scriptedJob, "status": "succeeded", "suite": args.Suite, "passed": 42, "failed": 0}), nil
}

func (p *scriptedProvider) lookup(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		Key string `json:"idempotency_key"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.lookupKeys = append(p.lookupKeys, args.Key)
	p.mu.Unlock()
	if p.lookupFails {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "index unavailable"}}}, nil
	}
	out := map[string]any{"status": p.lookupStatus, "jobs": []any{}}
	if p.lookupStatus != "not_found" && !p.lookupNoJobID {
		out["job_id"] = scriptedJob
		out["jobs"] = []any{map[string]any{"job_id": scriptedJob, "status": p.lookupStatus}}
	}
	return structured(out), nil
}

func (p *scriptedProvider) getJob(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if p.getJobFails {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "job store unavailable"}}}, nil
	}
	return structured(map[string]any{"job_id": scriptedJob, "status": p.jobStatus, "suite": "settlement", "result": map[string]any{"passed": 42, "failed": 0}}), nil
}

func (p *scriptedProvider) listCharges(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	charge := map[string]any{"charge_id": "ch-7", "job_id": scriptedJob, "amount_usd": "17.84", "currency": "USD", "status": "final"}
	if p.jobStatus == "failed" {
		charge["amount_usd"], charge["status"] = "0.00", "refunded"
	}
	return structured(map[string]any{"charges": []any{charge}}), nil
}

// idempotencyKeys is the idempotency key of every run_suite and every
// lookup_operation call, in order.
func (p *scriptedProvider) idempotencyKeys() (runSuite, lookup []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.keys...), append([]string(nil), p.lookupKeys...)
}

func structured(v map[string]any) *mcp.CallToolResult {
	b, _ := json.Marshal(v)
	return &mcp.CallToolResult{StructuredContent: v, Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}
}
