package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/bench/internal/cpu"
)

// The MCP call ceiling's server: a go-sdk MCP server over Streamable HTTP
// with the SDK's defaults but one, and one tool that returns its argument
// at once. The one is Stateless: go-sdk v1.8.0 serves 2026-07-28 only
// without sessions (its default handler, with sessions, negotiates
// 2025-11-25 with the same client), as the gateway and providersim serve
// it. Nothing stands between the clients and it: no gateway,
// no database. The replicas list the same tool as a non-consequential one
// of a second upstream, for the pass-through measurement.
const (
	echoUpstream = "echo"
	echoTool     = "echo"
	// echoEnv, when set, makes this binary serve the echo server on
	// loopback instead of benchmarking: the child process the ceiling is
	// measured against, so that its CPU can be told from the clients'.
	echoEnv = "TASKGATE_REPLICABENCH_ECHO_SERVER"
)

// echoArgs are the echo tool's arguments and its structured result.
type echoArgs struct {
	Text string `json:"text" jsonschema:"text to return"`
}

// echoHandler is the echo server's HTTP handler, MCP at /mcp.
func echoHandler() http.Handler {
	server := mcp.NewServer(&mcp.Implementation{Name: "replicabench-echo", Version: "v1"}, nil)
	mcp.AddTool(server, &mcp.Tool{
		Name:        echoTool,
		Description: "Returns its text at once.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true},
	}, func(_ context.Context, _ *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, echoArgs, error) {
		return nil, a, nil
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true}))
	return mux
}

// echo calls the echo tool as tool with text and checks the answer.
func echo(ctx context.Context, cs *mcp.ClientSession, tool, text string) error {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": text}})
	if err != nil {
		return fmt.Errorf("call %s: %w", tool, err)
	}
	if res.IsError {
		return fmt.Errorf("%s answered with an error: %v", tool, res.Content)
	}
	sc, _ := res.StructuredContent.(map[string]any)
	if got := sc["text"]; got != text {
		return fmt.Errorf("%s answered text %v, want %q", tool, got, text)
	}
	return nil
}

// serveEcho is the child's main: it listens on loopback, prints the
// address as its first line and serves until SIGTERM or SIGINT.
func serveEcho() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintf(os.Stderr, "echo server: %v\n", err)
		return 1
	}
	srv := &http.Server{Handler: echoHandler()}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	fmt.Println(ln.Addr().String())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(os.Stderr, "echo server: %v\n", err)
		return 1
	}
	return 0
}

// echoProcess is the echo server running as a child of this process.
type echoProcess struct {
	addr string
	cmd  *exec.Cmd
	done chan error
}

// startEchoProcess runs this binary again as the echo server and waits for
// its address.
func startEchoProcess(ctx context.Context) (*echoProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this binary to run the echo server: %w", err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), echoEnv+"=1")
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the echo server: %w", err)
	}
	p := &echoProcess{cmd: cmd, done: make(chan error, 1)}
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	// Wait closes the pipe: it starts only once the line is read.
	fail := func(err error) (*echoProcess, error) {
		_ = cmd.Process.Kill()
		<-line
		_ = cmd.Wait()
		return nil, err
	}
	select {
	case p.addr = <-line:
		go func() { p.done <- cmd.Wait() }()
		if p.addr == "" {
			p.stop()
			return nil, errors.New("the echo server exited before it printed its address")
		}
		return p, nil
	case <-ctx.Done():
		return fail(ctx.Err())
	case <-time.After(30 * time.Second):
		return fail(errors.New("the echo server printed no address within 30s"))
	}
}

func (p *echoProcess) cpu() time.Duration { return cpu.Of(p.cmd.Process.Pid) }

func (p *echoProcess) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
