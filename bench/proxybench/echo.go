package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The pass-through upstream: a go-sdk MCP server with one tool, echo, that
// returns its text at once, both as text content and as structured
// content. It is served three ways (upstreamKind): over Streamable HTTP
// with sessions, as most servers run today; stateless, the only way
// go-sdk v1.8.0 serves 2026-07-28 over HTTP; and over stdio. Each way is
// this binary run again with echoEnv naming it, a process of its own, as
// an MCP server is its clients'.
const (
	echoTool = "echo"
	// echoEnv set to an upstreamKind makes this binary serve the echo
	// server that way instead of benchmarking.
	echoEnv = "TASKGATE_PROXYBENCH_ECHO"
)

// echoArgs are the echo tool's arguments and its structured result.
type echoArgs struct {
	Text string `json:"text" jsonschema:"text to return"`
}

// echoServer is the echo upstream's MCP server.
func echoServer() *mcp.Server {
	server := mcp.NewServer(&mcp.Implementation{Name: "proxybench-echo", Version: "v1"}, nil)
	mcp.AddTool(server, &mcp.Tool{
		Name:        echoTool,
		Description: "Returns its text at once.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true},
	}, func(_ context.Context, _ *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, echoArgs, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text}}}, a, nil
	})
	return server
}

// echoHandler serves the echo server over Streamable HTTP at /mcp, with
// sessions or without.
func echoHandler(stateless bool) http.Handler {
	server := echoServer()
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: stateless}))
	return mux
}

// serveEcho is an echo upstream child's main, kind its echoEnv.
func serveEcho(kind string) int {
	switch k := upstreamKind(kind); k {
	case upstreamStdio:
		return serveEchoStdio()
	case upstreamSessions, upstreamStateless:
		return serveEchoHTTP(k == upstreamStateless)
	}
	fmt.Fprintf(os.Stderr, "proxybench: %s=%q names no echo upstream; use sessions, stateless or stdio\n", echoEnv, kind)
	return 2
}

// serveEchoHTTP is an HTTP echo child's main: it listens on a free
// loopback port, prints the address as its first line and serves until a
// signal or until its stdin ends, which the benchmark holds open while it
// runs, so that the child ends with it however it ends.
func serveEchoHTTP(stateless bool) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintf(os.Stderr, "proxybench echo server: listen on loopback: %v\n", err)
		return 1
	}
	srv := &http.Server{Handler: echoHandler(stateless)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Println(ln.Addr().String())
	select {
	case err := <-served:
		fmt.Fprintf(os.Stderr, "proxybench echo server: %v\n", err)
		return 1
	case <-ctx.Done():
	}
	// Clients have closed their sessions by now; a stream still open is
	// cut after a short wait.
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	return 0
}

// serveEchoStdio is the stdio child's main: it serves one client on stdin
// and stdout until its input ends (the client closed it) or a signal.
func serveEchoStdio() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := echoServer().Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "proxybench echo server: %v\n", err)
		return 1
	}
	return 0
}

// echo calls the echo tool as tool with text and checks both renderings
// of the answer.
func echo(ctx context.Context, cs *mcp.ClientSession, tool, text string) error {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": text}})
	if err != nil {
		return fmt.Errorf("call %s: %w", tool, err)
	}
	if res.IsError {
		return fmt.Errorf("%s answered with an error: %s", tool, contentText(res))
	}
	if got := contentText(res); got != text {
		return fmt.Errorf("%s answered text content %q, want %q", tool, got, text)
	}
	sc, _ := res.StructuredContent.(map[string]any)
	if got := sc["text"]; got != text {
		return fmt.Errorf("%s answered structured text %v, want %q", tool, got, text)
	}
	return nil
}

// contentText is a result's content when it is one text block, or a
// description of what it is instead.
func contentText(res *mcp.CallToolResult) string {
	if len(res.Content) != 1 {
		return fmt.Sprintf("(%d content blocks)", len(res.Content))
	}
	t, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		return fmt.Sprintf("(a %T block)", res.Content[0])
	}
	return t.Text
}
