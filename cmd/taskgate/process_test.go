package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/internal/gatewaybin"
	"github.com/taskgate/taskgate/internal/syncbuf"
	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger/dburl"
	"github.com/taskgate/taskgate/sim/fixtures"
)

// gatewayBinary is cmd/taskgate, built once for the tests that run it as a
// process of its own.
var gatewayBinary string

func TestMain(m *testing.M) {
	binary, remove, err := gatewaybin.Build(".", "taskgate-process-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gatewayBinary = binary
	code := m.Run()
	remove()
	os.Exit(code)
}

// gateway is a running `taskgate serve` process.
type gateway struct {
	cmd  *exec.Cmd
	out  syncbuf.Buffer
	done chan error
}

// startGateway runs `taskgate serve --config path` and returns without
// waiting for it to answer; it is stopped when the test ends, and its
// output logged if the test failed.
func startGateway(t *testing.T, path string) *gateway {
	t.Helper()
	return startCommand(t, exec.Command(gatewayBinary, "serve", "--config", path, "--log-level", "info"))
}

// startCommand starts cmd, a command that runs taskgate serve, in a process
// group of its own, as startGateway does.
func startCommand(t *testing.T, cmd *exec.Cmd) *gateway {
	t.Helper()
	g := &gateway{cmd: cmd, done: make(chan error, 1)}
	g.cmd.Stdout = io.Discard
	g.cmd.Stderr = &g.out
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := g.cmd.Start(); err != nil {
		t.Fatalf("start taskgate serve: %v", err)
	}
	go func() { g.done <- g.cmd.Wait() }()
	t.Cleanup(func() {
		_ = g.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-g.done:
		case <-time.After(20 * time.Second):
			_ = g.cmd.Process.Kill()
			<-g.done
		}
		if t.Failed() {
			t.Logf("taskgate serve's output:\n%s", g.out.String())
		}
	})
	return g
}

// waitOutput waits until the gateway has printed s.
func (g *gateway) waitOutput(t *testing.T, ctx context.Context, s string) {
	t.Helper()
	testwait.Until(t, ctx, "taskgate serve to print "+s, func() (bool, error) {
		select {
		case err := <-g.done:
			g.done <- err
			return false, fmt.Errorf("taskgate serve exited: %v", err)
		default:
		}
		return strings.Contains(g.out.String(), s), errors.New("not printed yet")
	})
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// serveMCP serves server over Streamable HTTP, with sessions, on a
// loopback port until the test ends, and returns its endpoint.
func serveMCP(t *testing.T, server *mcp.Server) string {
	t.Helper()
	return serveHandler(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
}

// echoServer is an MCP server with one tool, echo, that answers with its
// text argument.
func echoServer(name string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "v1"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "echoes text"}, func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + ": " + a.Text}}}, nil, nil
	})
	return s
}

// apiKey creates an agent key of tenant in the ledger db.
func apiKey(t *testing.T, ctx context.Context, db, tenant string) string {
	t.Helper()
	s, err := dburl.Open(ctx, db, &dburl.Options{Migrate: true})
	if err != nil {
		t.Fatalf("open the ledger: %v", err)
	}
	defer s.Close()
	key, _, err := authn.NewAPIKey(ctx, s, tenant, "process test")
	if err != nil {
		t.Fatalf("create an API key: %v", err)
	}
	return key
}

// dial opens a 2025-11-25 session, the era that lives in the gateway's
// memory, with a handler told of every tools/list_changed.
func dial(t *testing.T, ctx context.Context, url, key string, changed func()) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "process-test", Version: "v1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed() },
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: url, HTTPClient: &http.Client{Transport: fixtures.Bearer{Key: key, Next: http.DefaultTransport}},
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Fatalf("negotiated protocol %s, want 2025-11-25", v)
	}
	return cs
}

// toolNames lists the session's tools by name.
func toolNames(ctx context.Context, cs *mcp.ClientSession) (map[string]bool, error) {
	names := map[string]bool{}
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		names[tool.Name] = true
	}
	return names, nil
}

// getStatus answers the status code of GET url.
func getStatus(url string) (int, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
