package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
)

// TestServeStartsWithAnUpstreamDown starts `taskgate serve` with a
// required upstream that nothing listens on beside one that works: the
// gateway answers /healthz at once, lists and calls the working
// upstream's tools, refuses a new consequential call to the down one with
// upstream_unavailable and is not ready; once the down upstream starts,
// its tools appear to the open session with list_changed and a
// consequential call to it completes.
func TestServeStartsWithAnUpstreamDown(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	dir := t.TempDir()
	providerAddr := freeAddr(t)
	listen := freeAddr(t)
	db := "sqlite:" + filepath.Join(dir, "ledger.db")
	echoURL := serveMCP(t, echoServer("echo"))
	cfg := fixtures.ConfigYAML("http://"+providerAddr+"/mcp", listen, db, fixtures.ConfigOptions{}) +
		"  - name: echo\n    url: " + echoURL + "\n"
	path := filepath.Join(dir, "taskgate.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	key := apiKey(t, ctx, db, "acme")

	g := startGateway(t, path)
	g.waitOutput(t, ctx, "taskgate is serving")
	listening := time.Now()
	base := "http://" + listen
	testwait.Until(t, ctx, "/healthz to answer", func() (bool, error) {
		code, err := getStatus(base + "/healthz")
		return code == http.StatusOK, fmt.Errorf("status %d, %v", code, err)
	})
	if took := time.Since(listening); took > time.Second {
		t.Errorf("/healthz answered %v after the listener opened, want within 1s", took)
	}
	if code, err := getStatus(base + "/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz with a required upstream down = %d, %v; want 503", code, err)
	}

	var changed atomic.Int32
	cs := dial(t, ctx, base+"/mcp", key, func() { changed.Add(1) })
	var names map[string]bool
	testwait.Until(t, ctx, "the working upstream's tools to be listed", func() (bool, error) {
		var err error
		names, err = toolNames(ctx, cs)
		return names["echo.echo"], fmt.Errorf("tools %v, %v", names, err)
	})
	if names[fixtures.RunSuiteTool] {
		t.Errorf("tools/list has %s while its upstream is down", fixtures.RunSuiteTool)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo.echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil || res.IsError || fixtures.ResultText(res) != "echo: hi" {
		t.Fatalf("echo.echo = %v, %v; want echo: hi", res, err)
	}

	_, err = cs.CallTool(ctx, fixtures.RunSuiteCall("op-while-down", nil))
	if reason := errorReason(err); reason != ledger.ReasonUpstreamUnavailable {
		t.Fatalf("consequential call to the down upstream: %v (reason %q); want reason %s", err, reason, ledger.ReasonUpstreamUnavailable)
	}

	sim := providersim.New(nil)
	ln, err := net.Listen("tcp", providerAddr)
	if err != nil {
		t.Fatalf("start the provider on %s: %v", providerAddr, err)
	}
	srv := &http.Server{Handler: sim.HTTPHandler()}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	before := changed.Load()
	testwait.Until(t, ctx, "the provider's tools to appear with list_changed", func() (bool, error) {
		names, err := toolNames(ctx, cs)
		return changed.Load() > before && names[fixtures.RunSuiteTool], fmt.Errorf("list_changed %d times, tools %v, %v", changed.Load()-before, names, err)
	})
	testwait.Until(t, ctx, "/readyz to be ready", func() (bool, error) {
		code, err := getStatus(base + "/readyz")
		return code == http.StatusOK, fmt.Errorf("status %d, %v", code, err)
	})
	res, err = cs.CallTool(ctx, fixtures.RunSuiteCall("op-after-up", nil))
	if err != nil || res.IsError {
		t.Fatalf("run_suite once its upstream is up = %v, %v", res, err)
	}
	if jobs := sim.Jobs(); len(jobs) != 1 {
		t.Errorf("the provider has %d jobs, want 1 (the refused call started none)", len(jobs))
	}
}

// errorReason is the data.reason of a JSON-RPC error.
func errorReason(err error) string {
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) {
		return ""
	}
	var data struct {
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal(werr.Data, &data)
	return data.Reason
}
