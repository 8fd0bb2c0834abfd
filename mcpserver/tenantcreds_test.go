package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
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

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/daemon"
	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/dburl"
	"github.com/taskgate/taskgate/secrets"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
	"github.com/taskgate/taskgate/taskwire"
)

// credentialLog records the credential of every request an upstream
// receives, with what the request was.
type credentialLog struct {
	mu   sync.Mutex
	reqs []credentialRequest
}

// credentialRequest is one HTTP request an upstream received.
type credentialRequest struct {
	auth    string // the Authorization header
	session string // Mcp-Session-Id; "" outside a session
	method  string // the JSON-RPC method, or the HTTP method of a GET or DELETE
	id      string // the JSON-RPC request ID, as JSON
	tool    string // params.name of a tools/call
	taskID  string // params.taskId of a tasks/get, tasks/result or tasks/cancel
	args    map[string]any
	meta    map[string]any
}

func (l *credentialLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := credentialRequest{auth: r.Header.Get("Authorization"), session: r.Header.Get("Mcp-Session-Id"), method: r.Method}
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			var msg struct {
				Method string          `json:"method"`
				ID     json.RawMessage `json:"id"`
				Params struct {
					Name      string         `json:"name"`
					TaskID    string         `json:"taskId"`
					Arguments map[string]any `json:"arguments"`
					Meta      map[string]any `json:"_meta"`
				} `json:"params"`
			}
			_ = json.Unmarshal(b, &msg)
			req.method, req.id, req.tool, req.args, req.meta = msg.Method, string(msg.ID), msg.Params.Name, msg.Params.Arguments, msg.Params.Meta
			req.taskID = msg.Params.TaskID
		}
		l.mu.Lock()
		l.reqs = append(l.reqs, req)
		l.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

func (l *credentialLog) seen() []credentialRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reqs)
}

// syncBuffer is a log destination for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestTenantCredentials: two upstreams with a credential per tenant — the
// simulated provider (2026-07-28) and a 2025-11-25 server that holds
// sessions — each recording the Authorization header of every request.
// Tenants acme and globex each run a consequential suite and cancel it
// (the worker's send, fetches, lookups, charges and cancel), have a
// matrix priced (estimate_tool), and make pass-through calls by every path
// (forwarded, relayed in a 2025-11-25 relay session from either protocol
// era, relayed statelessly, and the SDK path on the tenant's own
// 2025-11-25 session). The worker follows each job as the provider's task
// (tasks/get); the contract cancels with cancel_job, so no tasks/cancel is
// expected, but any is checked. Every request on a tenant's behalf carries that
// tenant's credential (acme's read from the environment, globex's sealed
// with the secrets keys), and no upstream session ever carries two
// credentials. Tenant initech, without an entry, is refused with
// tenant_credential_missing and reaches neither upstream. No credential
// appears in the gateway's log or its ledger (receipts included).
func TestTenantCredentials(t *testing.T) {
	creds := map[string]string{
		"acme":   "Bearer acme-credential-5b1e",
		"globex": "Bearer globex-credential-93c0",
	}
	const shared = "Bearer gateway-credential-77d2"
	// acme's credential comes from the environment, globex's sealed with
	// the secrets keys.
	t.Setenv("TASKGATE_TEST_ACME_TOKEN", creds["acme"])
	ring, err := secrets.ParseRing([]byte(secrets.NewKey()), "test")
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)

	sim := providersim.New(&providersim.Options{JobDuration: 5 * time.Minute})
	t.Cleanup(func() { sim.Close() })
	var hosted, plumbing credentialLog
	simSrv := httptest.NewServer(hosted.wrap(sim.HTTPHandler()))
	t.Cleanup(simSrv.Close)
	plumbSrv := httptest.NewServer(plumbing.wrap(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		s := plumbingServer("2025-11-25")
		// A header argument keeps the call on the SDK path.
		s.AddTool(&mcp.Tool{Name: "region", Description: "Echoes its region.", InputSchema: map[string]any{
			"type":       "object",
			"properties": map[string]any{"region": map[string]any{"type": "string", "x-mcp-header": "Region"}},
		}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
		})
		return s
	}, nil)))
	t.Cleanup(plumbSrv.Close)

	credentials := "    headers: {Authorization: " + shared + "}\n" +
		"    tenant_headers:\n" +
		"      acme: {Authorization: {env: TASKGATE_TEST_ACME_TOKEN}}\n" +
		"      globex: {Authorization: {sealed: %s}}\n"
	dbPath := filepath.Join(t.TempDir(), "taskgate.db")
	y := fixtures.ConfigYAML(simSrv.URL+"/mcp", "127.0.0.1:0", "sqlite:"+dbPath, fixtures.ConfigOptions{})
	seal := func(up string) string {
		return fmt.Sprintf(credentials, ring.SealBytes([]byte(creds["globex"]), config.TenantHeaderLabel(up, "globex", "Authorization")))
	}
	y = strings.Replace(y, "  - name: hosted_test\n", "  - name: hosted_test\n"+seal("hosted_test"), 1)
	y += "  - name: plumbing\n    url: " + plumbSrv.URL + "\n" + seal("plumbing")
	cfg, err := config.Parse(strings.NewReader(y), "tenantcreds.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	var logged syncBuffer
	log := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))
	url, keys := startDaemonWith(t, ctx, &daemon.Options{Config: cfg, Logger: log, Secrets: ring}, "acme", "globex", "initech")
	key := map[string]string{"acme": keys[0], "globex": keys[1], "initech": keys[2]}

	modern := map[string]*mcp.ClientSession{}
	legacy := map[string]*mcp.ClientSession{}
	for _, tenant := range []string{"acme", "globex", "initech"} {
		cs, err := fixtures.Dial(ctx, url, key[tenant], fixtures.EraExtension, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		modern[tenant] = cs
		legacy[tenant] = dialGateway(t, url, key[tenant], "legacy-"+tenant, "2025-11-25", nil)
	}
	testwait.Until(t, ctx, "both upstreams' tools to be listed", func() (bool, error) {
		listed, err := modern["acme"].ListTools(ctx, nil)
		if err != nil {
			return false, err
		}
		names := map[string]bool{}
		for _, tool := range listed.Tools {
			names[tool.Name] = true
		}
		return names["hosted_test.estimate_suite"] && names["plumbing.region"], nil
	})

	// A client sends a header argument once it has listed the tool.
	for _, cs := range modern {
		if _, err := cs.ListTools(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	jobs := map[string]providersim.Job{}
	for _, tenant := range []string{"acme", "globex"} {
		suite := tenant + "-suite"
		task, res, err := taskwire.CallToolAsTask(ctx, modern[tenant], fixtures.RunSuiteCall("op-"+tenant, map[string]any{"suite": suite}), nil)
		if err != nil || task == nil {
			t.Fatalf("%s: run_suite = %v, %s, %v; want a task", tenant, task, fixtures.ResultText(res), err)
		}
		testwait.Until(t, ctx, tenant+"'s job to run at the provider", func() (bool, error) {
			for _, j := range sim.Jobs() {
				if j.Suite == suite && j.Status == providersim.StatusRunning {
					jobs[tenant] = j
					return true, nil
				}
			}
			return false, nil
		})
		// The worker follows the job as the upstream's task: the simulated
		// provider's task ID is its job ID.
		testwait.Until(t, ctx, "the worker to look "+tenant+"'s task up at the provider", func() (bool, error) {
			for _, r := range hosted.seen() {
				if r.method == "tasks/get" && r.taskID == jobs[tenant].ID {
					return true, nil
				}
			}
			return false, nil
		})
		// Priced before anything else happens: estimate_matrix.
		if _, _, err := taskwire.CallToolAsTask(ctx, modern[tenant], fixtures.RunMatrixCall("matrix-"+tenant, suite, 2), nil); err != nil {
			t.Fatalf("%s: run_matrix: %v", tenant, err)
		}
		if _, err := taskwire.CancelTask(ctx, modern[tenant], task.ID); err != nil {
			t.Fatalf("%s: tasks/cancel: %v", tenant, err)
		}
		testwait.Until(t, ctx, tenant+"'s job to be cancelled at the provider and its charges read", func() (bool, error) {
			for _, r := range hosted.seen() {
				if r.tool == providersim.ToolListCharges && r.args["job_id"] == jobs[tenant].ID {
					return true, nil
				}
			}
			return false, nil
		})

		marker := mcp.Meta{"tenant-marker": tenant}
		for _, call := range []struct {
			cs     *mcp.ClientSession
			params *mcp.CallToolParams
		}{
			{modern[tenant], &mcp.CallToolParams{Name: "hosted_test.estimate_suite", Arguments: map[string]any{"suite": suite}}}, // forwarded
			{legacy[tenant], &mcp.CallToolParams{Name: "hosted_test.estimate_suite", Arguments: map[string]any{"suite": suite}}}, // relayed as a stateless request
			{legacy[tenant], &mcp.CallToolParams{Name: "plumbing.meta", Arguments: map[string]any{}, Meta: marker}},              // in a 2025-11-25 relay session
			{modern[tenant], &mcp.CallToolParams{Name: "plumbing.meta", Arguments: map[string]any{}, Meta: marker}},              // relayed into the relay session
			{modern[tenant], &mcp.CallToolParams{Name: "plumbing.region", Arguments: map[string]any{"region": tenant}}},          // the SDK path
		} {
			if res, err := call.cs.CallTool(ctx, call.params); err != nil || res.IsError {
				t.Fatalf("%s: %s = %+v, %v", tenant, call.params.Name, res, err)
			}
		}
	}

	// initech has no entry: every path refuses it, saying why.
	for _, call := range []struct {
		cs     *mcp.ClientSession
		params *mcp.CallToolParams
	}{
		{modern["initech"], fixtures.RunSuiteCall("op-initech", map[string]any{"suite": "initech-suite"})},
		{modern["initech"], &mcp.CallToolParams{Name: "hosted_test.estimate_suite", Arguments: map[string]any{"suite": "initech-suite"}}},
		{legacy["initech"], &mcp.CallToolParams{Name: "hosted_test.estimate_suite", Arguments: map[string]any{"suite": "initech-suite"}}},
		{legacy["initech"], &mcp.CallToolParams{Name: "plumbing.meta", Arguments: map[string]any{}, Meta: mcp.Meta{"tenant-marker": "initech"}}},
		{modern["initech"], &mcp.CallToolParams{Name: "plumbing.region", Arguments: map[string]any{"region": "initech"}}},
	} {
		_, err := call.cs.CallTool(ctx, call.params)
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || !strings.Contains(werr.Message, "has none for yours") || !strings.Contains(string(werr.Data), ledger.ReasonTenantCredentialMissing) {
			t.Errorf("initech: %s = %v; want a refusal with reason %s", call.params.Name, err, ledger.ReasonTenantCredentialMissing)
		}
	}
	for _, r := range append(hosted.seen(), plumbing.seen()...) {
		if r.args["suite"] == "initech-suite" || r.args["region"] == "initech" || r.meta["tenant-marker"] == "initech" {
			t.Errorf("initech's refused %s reached an upstream", r.tool)
		}
	}

	// Whose each call was, from its arguments, never from its header.
	owner := func(r credentialRequest) string {
		for tenant, job := range jobs {
			switch {
			case r.args["suite"] == tenant+"-suite", r.args["region"] == tenant, r.meta["tenant-marker"] == tenant,
				r.args["job_id"] == job.ID, r.args["idempotency_key"] == job.IdempotencyKey, r.taskID == job.ID:
				return tenant
			}
		}
		return ""
	}
	seen := map[string]int{}
	for _, l := range []struct {
		name string
		log  *credentialLog
	}{{"hosted_test", &hosted}, {"plumbing", &plumbing}} {
		sessions := map[string]string{}
		for _, r := range l.log.seen() {
			if r.session != "" {
				if was, ok := sessions[r.session]; ok && was != r.auth {
					t.Errorf("%s: session %s carried two credentials (%s)", l.name, r.session, r.method)
				}
				sessions[r.session] = r.auth
			}
			kind := l.name + "." + r.tool
			switch r.method {
			case "tools/call":
			case "tasks/get", "tasks/result", "tasks/cancel":
				kind = l.name + " " + r.method
			default:
				continue
			}
			o := owner(r)
			if o == "" || r.auth != creds[o] {
				t.Errorf("%s: %s %s%s (id %s) of tenant %q carried the credential of %q", l.name, r.method, r.tool, r.taskID, r.id, o, credentialOf(creds, r.auth))
				continue
			}
			seen[o+" "+kind]++
			if strings.HasPrefix(strings.Trim(r.id, `"`), "taskgate-relay-") {
				seen[o+" "+kind+" (relay session)"]++
			}
		}
	}
	for _, tenant := range []string{"acme", "globex"} {
		for _, kind := range []string{
			"hosted_test.run_suite", "hosted_test.cancel_job", "hosted_test.lookup_operation", "hosted_test.list_charges", "hosted_test.estimate_matrix",
			"plumbing.meta (relay session)", "plumbing.region", "hosted_test tasks/get",
		} {
			if seen[tenant+" "+kind] == 0 {
				t.Errorf("%s: no %s seen at the upstream with its credential (seen: %v)", tenant, kind, seen)
			}
		}
		if n := seen[tenant+" hosted_test.estimate_suite"]; n < 2 {
			t.Errorf("%s: %d estimate_suite calls seen with its credential; want 2 (forwarded and relayed)", tenant, n)
		}
		if n := seen[tenant+" plumbing.meta (relay session)"]; n < 2 {
			t.Errorf("%s: %d meta calls seen in its relay session; want 2 (from either era)", tenant, n)
		}
	}

	for _, secret := range append(slices.Collect(maps.Values(creds)), shared) {
		token := strings.TrimPrefix(secret, "Bearer ")
		if strings.Contains(logged.String(), token) {
			t.Errorf("the gateway's log shows a credential (%s)", token)
		}
		for _, f := range []string{dbPath, dbPath + "-wal"} {
			b, err := os.ReadFile(f)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
			if bytes.Contains(b, []byte(token)) {
				t.Errorf("the ledger %s holds a credential (%s)", filepath.Base(f), token)
			}
		}
	}
}

// credentialOf names whose credential auth is, for a failure message
// that shows none.
func credentialOf(creds map[string]string, auth string) string {
	for tenant, c := range creds {
		if c == auth {
			return tenant
		}
	}
	if auth == "" {
		return "nobody"
	}
	return "the gateway"
}

// TestTenantCredentialsReload: a reload that gives a tenant a new
// credential (here sealed with the secrets keys, which a reload opens
// anew, in place of one from the environment) reconnects the upstream and
// its next requests carry the new one; a reload whose sealed value does
// not open (sealed for another tenant) is refused, naming the field, and
// the running credential stays.
func TestTenantCredentialsReload(t *testing.T) {
	ctx := testCtx(t)
	var log credentialLog
	up := httptest.NewServer(log.wrap(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return plumbingServer() },
		&mcp.StreamableHTTPOptions{Stateless: true})))
	t.Cleanup(up.Close)
	db := "sqlite:" + filepath.Join(t.TempDir(), "taskgate.db")
	base := fixtures.ConfigYAML(up.URL, "127.0.0.1:0", db, fixtures.ConfigOptions{})
	withCredentials := func(acme string) *config.Config {
		t.Helper()
		y := strings.Replace(base, "  - name: hosted_test\n", "  - name: plumbing\n    tenant_headers:\n      acme: {Authorization: "+acme+"}\n", 1)
		cfg, err := config.Parse(strings.NewReader(y), "reload.yaml", nil)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	t.Setenv("TASKGATE_TEST_ACME_TOKEN", "Bearer acme-before")
	ring, err := secrets.ParseRing([]byte(secrets.NewKey()), "test")
	if err != nil {
		t.Fatal(err)
	}
	d, err := daemon.Start(ctx, &daemon.Options{Config: withCredentials("{env: TASKGATE_TEST_ACME_TOKEN}"), Secrets: ring})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(context.Background()) })
	store, err := dburl.Open(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	key, _, err := authn.NewAPIKey(ctx, store, "acme", "test")
	if err != nil {
		t.Fatal(err)
	}
	cs := dialGateway(t, d.URL+"/mcp", key, "acme-client", "", nil)
	callWith := func(want string) {
		t.Helper()
		var res *mcp.CallToolResult
		testwait.Until(t, ctx, "plumbing.meta to be listed and answer", func() (bool, error) {
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "plumbing.meta", Arguments: map[string]any{}})
			return err == nil && !res.IsError, err
		})
		calls := log.seen()
		var last credentialRequest
		for _, r := range calls {
			if r.method == "tools/call" {
				last = r
			}
		}
		if last.auth != want {
			t.Errorf("the upstream's last tools/call carried %q, want %q", last.auth, want)
		}
	}
	callWith("Bearer acme-before")

	sealed := func(tenant string) string {
		return "{sealed: " + ring.SealBytes([]byte("Bearer acme-after"), config.TenantHeaderLabel("plumbing", tenant, "Authorization")) + "}"
	}
	changes, err := d.Reload(ctx, withCredentials(sealed("acme")))
	if err != nil || !slices.Contains(changes, "upstream plumbing reconnects with a new tenant_headers") {
		t.Fatalf("Reload = %q, %v; want the upstream reconnected with new tenant_headers", changes, err)
	}
	callWith("Bearer acme-after")

	_, err = d.Reload(ctx, withCredentials(sealed("globex")))
	if err == nil || !strings.Contains(err.Error(), "upstreams[0].tenant_headers.acme.Authorization.sealed: does not open") {
		t.Fatalf("Reload(a value sealed for another tenant) = %v; want a refusal naming the field", err)
	}
	callWith("Bearer acme-after")
}

// TestRemovedTenantCredentialSendsNothing: an operation accepted for acme
// whose entry a reload then removes sends nothing more, with no credential:
// its cancellation is recorded as not sent, saying why, and the provider
// never hears of it; the job runs on.
func TestRemovedTenantCredentialSendsNothing(t *testing.T) {
	ctx := testCtx(t)
	sim := providersim.New(&providersim.Options{JobDuration: 5 * time.Minute})
	t.Cleanup(func() { sim.Close() })
	var log credentialLog
	simSrv := httptest.NewServer(log.wrap(sim.HTTPHandler()))
	t.Cleanup(simSrv.Close)
	db := "sqlite:" + filepath.Join(t.TempDir(), "taskgate.db")
	base := fixtures.ConfigYAML(simSrv.URL+"/mcp", "127.0.0.1:0", db, fixtures.ConfigOptions{})
	withTenant := func(tenant string) *config.Config {
		t.Helper()
		y := strings.Replace(base, "  - name: hosted_test\n", "  - name: hosted_test\n    headers: {Authorization: Bearer gateway-credential}\n    tenant_headers:\n      "+
			tenant+": {Authorization: {env: TASKGATE_TEST_TOKEN}}\n", 1)
		cfg, err := config.Parse(strings.NewReader(y), "removed.yaml", nil)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	t.Setenv("TASKGATE_TEST_TOKEN", "Bearer tenant-credential")
	d, err := daemon.Start(ctx, &daemon.Options{Config: withTenant("acme")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(context.Background()) })
	store, err := dburl.Open(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	key, _, err := authn.NewAPIKey(ctx, store, "acme", "test")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := fixtures.Dial(ctx, d.URL+"/mcp", key, fixtures.EraExtension, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	var task *taskwire.Task
	testwait.Until(t, ctx, "run_suite to be accepted", func() (bool, error) {
		task, _, err = taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall("op-removed", nil), nil)
		return err == nil && task != nil, err
	})
	testwait.Until(t, ctx, "the job to run at the provider", func() (bool, error) {
		jobs := sim.Jobs()
		return len(jobs) == 1 && jobs[0].Status == providersim.StatusRunning, nil
	})

	if _, err := d.Reload(ctx, withTenant("globex")); err != nil {
		t.Fatal(err)
	}
	// A retry of the accepted operation attaches to it, sending nothing;
	// a new one is refused.
	again, res, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall("op-removed", nil), nil)
	if err != nil || again == nil || again.ID != task.ID {
		t.Errorf("a retry of op-removed = %v, %s, %v; want its task %s", again, fixtures.ResultText(res), err, task.ID)
	}
	_, _, err = taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall("op-new", nil), nil)
	if werr := (*jsonrpc.Error)(nil); !errors.As(err, &werr) || !strings.Contains(string(werr.Data), ledger.ReasonTenantCredentialMissing) {
		t.Errorf("a new operation after acme's entry was removed = %v; want a refusal with reason %s", err, ledger.ReasonTenantCredentialMissing)
	}
	if _, err := taskwire.CancelTask(ctx, cs, task.ID); err != nil {
		t.Fatalf("tasks/cancel: %v", err)
	}
	op, err := store.OperationGet(ctx, &ledger.OperationGetParams{Tenant: "acme", OperationID: "op-removed"})
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, ctx, "the cancellation to be recorded as not sent", func() (bool, error) {
		evs, err := store.EventList(ctx, op.ID)
		for _, e := range evs {
			var data ledger.CancelSentData
			if e.Kind == ledger.EventCancelSent && json.Unmarshal(e.Data, &data) == nil && strings.Contains(data.Error, "has none for tenant acme") {
				return true, nil
			}
		}
		return false, err
	})
	for _, r := range log.seen() {
		if r.tool == providersim.ToolCancelJob || r.tool == providersim.ToolRunSuite && r.auth != "Bearer tenant-credential" {
			t.Errorf("%s reached the provider with the credential %q", r.tool, r.auth)
		}
	}
	if jobs := sim.Jobs(); len(jobs) != 1 || jobs[0].Status != providersim.StatusRunning {
		t.Errorf("provider jobs %+v; want the one job running on", jobs)
	}
}

// TestTenantCredentialsSurface: resources, templates and prompts on behalf
// of a tenant go with its credential, on its own session: acme's and
// globex's lists, prompts/get, resources/read and resources/subscribe
// reach the upstream with each one's own credential (each tenant is
// subscribed at the upstream for itself, and hears the updates), and
// initech, without an entry, is refused each of them with
// tenant_credential_missing, nothing sent.
func TestTenantCredentialsSurface(t *testing.T) {
	creds := map[string]string{"acme": "Bearer acme-surface-1c4e", "globex": "Bearer globex-surface-8d2a"}
	t.Setenv("TASKGATE_TEST_ACME_TOKEN", creds["acme"])
	t.Setenv("TASKGATE_TEST_GLOBEX_TOKEN", creds["globex"])
	ctx := testCtx(t)
	up := newSurfaceUpstream("one", "2025-11-25")
	var log credentialLog
	srv := httptest.NewServer(log.wrap(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up.server }, nil)))
	t.Cleanup(srv.Close)
	db := "sqlite:" + filepath.Join(t.TempDir(), "taskgate.db")
	y := fmt.Sprintf("listen: 127.0.0.1:0\npublic_url: http://127.0.0.1:1\ndatabase: %q\nupstreams:\n"+
		"  - name: one\n    url: %s\n    prefix: \"\"\n    headers: {Authorization: Bearer gateway-surface}\n"+
		"    tenant_headers:\n      acme: {Authorization: {env: TASKGATE_TEST_ACME_TOKEN}}\n      globex: {Authorization: {env: TASKGATE_TEST_GLOBEX_TOKEN}}\n", db, srv.URL)
	cfg, err := config.Parse(strings.NewReader(y), "surface.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	url, keys := startDaemon(t, ctx, cfg, nil, "acme", "globex", "initech")
	key := map[string]string{"acme": keys[0], "globex": keys[1], "initech": keys[2]}
	const uri = "test://one/text"

	heard := map[string]*updates{}
	cs := map[string]*mcp.ClientSession{}
	for _, tenant := range []string{"acme", "globex", "initech"} {
		heard[tenant] = &updates{}
		cs[tenant] = dialSurface(t, url, key[tenant], "2025-11-25", &mcp.ClientOptions{ResourceUpdatedHandler: heard[tenant].add})
	}
	testwait.Until(t, ctx, "the upstream's prompts to be listed", func() (bool, error) {
		res, err := cs["acme"].ListPrompts(ctx, nil)
		return err == nil && len(res.Prompts) > 0, nil
	})

	// Each request names its tenant in an argument the upstream sees, so
	// that the log tells whose each one was.
	for _, tenant := range []string{"acme", "globex"} {
		c := cs[tenant]
		steps := []struct {
			what string
			do   func() error
		}{
			{"resources/list", func() error { _, err := c.ListResources(ctx, nil); return err }},
			{"resources/templates/list", func() error { _, err := c.ListResourceTemplates(ctx, nil); return err }},
			{"prompts/list", func() error { _, err := c.ListPrompts(ctx, nil); return err }},
			{"prompts/get", func() error {
				_, err := c.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"who": tenant}})
				return err
			}},
			{"resources/read", func() error { _, err := c.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); return err }},
			{"resources/subscribe", func() error { return c.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}) }},
		}
		for _, s := range steps {
			before := len(log.seen())
			if err := s.do(); err != nil {
				t.Fatalf("%s: %s: %v", tenant, s.what, err)
			}
			// The gateway lists on its own session too, to keep its
			// catalog: a list with its credential may be that.
			var sent bool
			for _, r := range log.seen()[before:] {
				if r.method != s.what {
					continue
				}
				switch {
				case r.auth == creds[tenant]:
					sent = true
				case strings.HasSuffix(s.what, "/list") && credentialOf(creds, r.auth) == "the gateway":
				default:
					t.Errorf("%s: %s reached the upstream with the credential of %s", tenant, s.what, credentialOf(creds, r.auth))
				}
			}
			if !sent {
				t.Errorf("%s: %s did not reach the upstream with its credential", tenant, s.what)
			}
		}
	}
	touch(t, cs["acme"], uri)
	for _, tenant := range []string{"acme", "globex"} {
		testwait.Until(t, ctx, tenant+" to hear that "+uri+" was updated", func() (bool, error) {
			return heard[tenant].count(uri) > 0, nil
		})
	}

	before := len(log.seen())
	for _, s := range []struct {
		what string
		do   func() error
	}{
		{"resources/list", func() error { _, err := cs["initech"].ListResources(ctx, nil); return err }},
		{"resources/templates/list", func() error { _, err := cs["initech"].ListResourceTemplates(ctx, nil); return err }},
		{"prompts/list", func() error { _, err := cs["initech"].ListPrompts(ctx, nil); return err }},
		{"prompts/get", func() error {
			_, err := cs["initech"].GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"who": "initech"}})
			return err
		}},
		{"resources/read", func() error { _, err := cs["initech"].ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); return err }},
		{"resources/subscribe", func() error { return cs["initech"].Subscribe(ctx, &mcp.SubscribeParams{URI: "test://one/blob"}) }},
	} {
		err := s.do()
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || !strings.Contains(werr.Message, "has none for yours") || !strings.Contains(string(werr.Data), ledger.ReasonTenantCredentialMissing) {
			t.Errorf("initech: %s = %v; want a refusal with reason %s", s.what, err, ledger.ReasonTenantCredentialMissing)
		}
	}
	for _, r := range log.seen()[before:] {
		switch r.method {
		case "prompts/get", "resources/read", "resources/subscribe":
			t.Errorf("initech's refused %s reached the upstream (credential of %s)", r.method, credentialOf(creds, r.auth))
		}
	}
}
