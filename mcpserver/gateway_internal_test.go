package mcpserver

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/ledger/sqlite"
	"github.com/taskgate/taskgate/upstream"
)

// TestRemovedServerIsLeftAlone: once a stdio front's session has ended and
// its server is removed, tool changes no longer reach it.
func TestRemovedServerIsLeftAlone(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "ledger.db")
	store, err := sqlite.Open(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	cfg, err := config.Parse(strings.NewReader("listen: 127.0.0.1:0\ndatabase: sqlite:"+db+"\nupstreams:\n  - name: up\n    url: http://127.0.0.1:1/mcp\n"), "t.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(&Options{Store: store, Pool: upstream.NewPool(cfg.Upstreams, nil), Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := g.NewServer("acme")
	if err != nil {
		t.Fatal(err)
	}
	gone, err := g.NewServer("acme")
	if err != nil {
		t.Fatal(err)
	}
	g.RemoveServer(gone)
	tool := &mcp.Tool{Name: "up.echo", InputSchema: map[string]any{"type": "object"}}
	g.publish(map[string]*mcp.Tool{tool.Name: tool}, map[string]*route{tool.Name: {upstream: "up", tool: "echo"}}, nil, nil)

	for _, tt := range []struct {
		name   string
		server *mcp.Server
		want   int
	}{{"kept", kept, 1}, {"removed", gone, 0}} {
		st, ct := mcp.NewInMemoryTransports()
		ss, err := tt.server.Connect(ctx, st, nil)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "c"}, nil).Connect(ctx, ct, nil)
		if err != nil {
			t.Fatal(err)
		}
		tools, err := cs.ListTools(ctx, nil)
		cs.Close()
		ss.Close()
		if err != nil || len(tools.Tools) != tt.want {
			t.Errorf("%s server lists %v, %v; want %d tools", tt.name, tools, err, tt.want)
		}
	}
}

// TestHiddenToolIsRefusedBeforeTheSync: a tool listed while exposed is
// the gateway's as soon as a reload hides it, before the next sync
// withdraws it from the list.
func TestHiddenToolIsRefusedBeforeTheSync(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "ledger.db")
	store, err := sqlite.Open(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	parse := func(cancelJob string) *config.Config {
		t.Helper()
		cfg, err := config.Parse(strings.NewReader("listen: 127.0.0.1:0\ndatabase: sqlite:"+db+
			"\nupstreams:\n  - name: hosted_test\n    url: http://127.0.0.1:1/mcp\n    tools:\n      run_suite:\n        consequential: true\n"+
			"        contract:\n          cancel: {tool: cancel_job, arguments: {job_id: \"{remote_job_id}\"}}\n      cancel_job: "+cancelJob+"\n"), "t.yaml", nil)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	exposed := parse("{expose: true}")
	g, err := New(&Options{Store: store, Pool: upstream.NewPool(exposed.Upstreams, nil), Config: exposed})
	if err != nil {
		t.Fatal(err)
	}
	tool := &mcp.Tool{Name: "hosted_test.cancel_job", InputSchema: map[string]any{"type": "object"}}
	g.publish(map[string]*mcp.Tool{tool.Name: tool}, map[string]*route{tool.Name: {upstream: "hosted_test", tool: "cancel_job"}}, nil, nil)
	if _, ok := g.route(tool.Name); !ok || g.gatewayTool(tool.Name) {
		t.Fatal("exposed cancel_job is not routed as a pass-through tool")
	}
	g.catalog.Replace(parse("{}"), nil)
	if _, ok := g.route(tool.Name); ok || !g.gatewayTool(tool.Name) {
		t.Error("cancel_job, hidden by the reload, is still routed before the sync")
	}
}
