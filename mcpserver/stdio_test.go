package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/cmd/taskgate/cli"
	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
	"github.com/taskgate/taskgate/taskwire"
)

const helperEnv = "TASKGATE_MCPSERVER_TEST_HELPER"

// TestMain lets the test binary stand in for the taskgate command (to run
// "serve --stdio" as a real child process) and for a stdio upstream: the
// provider simulator, the surface upstream of surface_test.go or the
// confirm upstream of input_test.go.
func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "taskgate":
		os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
	case "providersim":
		sim := providersim.New(&providersim.Options{JobDuration: 300 * time.Millisecond})
		err := sim.ServeStdio(context.Background(), os.Stdin, os.Stdout)
		sim.Close()
		if err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	case "confirm":
		_, server := newConfirmServer()
		if err := server.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	case "surface":
		if err := newSurfaceUpstream("stdio").server.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// stdioGateway starts "taskgate serve --stdio" as a child process in front
// of upstreamYAML-configured providers and connects a client in era.
func stdioGateway(t *testing.T, configYAML string, version string) *mcp.ClientSession {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "taskgate.yaml")
	if err := os.WriteFile(path, []byte(configYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "serve", "--stdio", "--config", path)
	cmd.Env = append(os.Environ(), helperEnv+"=taskgate")
	cmd.Stderr = os.Stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "stdio-test"}, &mcp.ClientOptions{Capabilities: taskwire.ClientCapabilitiesWithTasks(nil)})
	if err := taskwire.InstallClient(client); err != nil {
		t.Fatal(err)
	}
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := client.Connect(testCtx(t), taskwire.WrapClientTransport(&mcp.CommandTransport{Command: cmd}), opts)
	if err != nil {
		t.Fatalf("connect to taskgate serve --stdio: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestServeStdio(t *testing.T) {
	for _, tt := range []struct{ name, version string }{{"2026-07-28", ""}, {"2025-11-25", "2025-11-25"}} {
		t.Run(tt.name, func(t *testing.T) {
			sim := providersim.New(&providersim.Options{JobDuration: 300 * time.Millisecond})
			t.Cleanup(func() { sim.Close() })
			srv := httptest.NewServer(sim.HTTPHandler())
			t.Cleanup(srv.Close)
			db := "sqlite:" + filepath.Join(t.TempDir(), "taskgate.db")
			cs := stdioGateway(t, fixtures.ConfigYAML(srv.URL+"/mcp", "127.0.0.1:0", db, fixtures.ConfigOptions{}), tt.version)
			ctx := testCtx(t)
			task, _, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall("op-stdio", nil), nil)
			if err != nil || task == nil {
				t.Fatalf("tools/call = %v, %v; want a task", task, err)
			}
			done := awaitTask(t, cs, task.ID)
			if done.Status != taskwire.StatusCompleted {
				t.Fatalf("task ended %s", done.Status)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "hosted_test.estimate_suite", Arguments: map[string]any{"suite": "x"}})
			if err != nil || res.IsError {
				t.Fatalf("pass-through = %+v, %v", res, err)
			}
			if n := len(sim.Jobs()); n != 1 {
				t.Fatalf("provider jobs = %d, want 1", n)
			}
		})
	}
}

// TestStdioUpstream puts the gateway in front of a provider that it starts
// and supervises as a stdio child process.
func TestStdioUpstream(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "taskgate.db")
	y := fixtures.ConfigYAML("http://placeholder.invalid/mcp", "127.0.0.1:0", db, fixtures.ConfigOptions{})
	cmdLine, _ := json.Marshal([]string{os.Args[0]})
	y = strings.Replace(y, "    url: http://placeholder.invalid/mcp", "    command: "+string(cmdLine)+"\n    env: {"+helperEnv+": providersim}", 1)
	cs := stdioGateway(t, y, "")
	ctx := testCtx(t)
	testwait.Until(t, ctx, "the stdio provider's tools to be listed", func() (bool, error) {
		tools, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		return len(tools.Tools) > 0, nil
	})
	task, _, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall("op-stdio-upstream", nil), nil)
	if err != nil || task == nil {
		t.Fatalf("tools/call = %v, %v; want a task", task, err)
	}
	if done := awaitTask(t, cs, task.ID); done.Status != taskwire.StatusCompleted {
		t.Fatalf("task ended %s (%+v)", done.Status, done.Error)
	}
}
