package main

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const testKey = "tg_test_key"

// startProxy runs the proxy in front of backend as main would and returns
// its base URL.
func startProxy(t *testing.T, backend string) string {
	t.Helper()
	keyFile := filepath.Join(t.TempDir(), "agent.key")
	if err := os.WriteFile(keyFile, []byte(testKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-target", backend, "-key-file", keyFile}, pw, slog.New(slog.DiscardHandler))
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("proxy stopped with %v", err)
		}
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("the proxy printed no address: %v", err)
	}
	go io.Copy(io.Discard, pr)
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "bearerproxy listening at ")
	if !ok {
		t.Fatalf("the proxy printed %q, want its address", line)
	}
	return addr
}

func TestProxyAddsTheKeyAndKeepsHostAndOrigin(t *testing.T) {
	type seen struct{ authorization, host, origin, path string }
	got := make(chan seen, 1)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.Header.Get("Authorization"), r.Host, r.Header.Get("Origin"), r.URL.RequestURI()}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer backend.Close()
	proxy := startProxy(t, backend.URL)

	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, proxy+"/mcp?x=1", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "evil.example.com"
	req.Header.Set("Origin", "http://evil.example.com")
	req.Header.Set("Authorization", "Bearer the-clients-own")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("status %d through the proxy, want 204", resp.StatusCode)
	}
	want := seen{"Bearer " + testKey, "evil.example.com", "http://evil.example.com", "/mcp?x=1"}
	if s := <-got; s != want {
		t.Fatalf("the backend saw %+v, want %+v", s, want)
	}
}

// A body the client streams reaches the gateway whole, with its length.
func TestProxyForwardsBodiesWhole(t *testing.T) {
	type seen struct {
		length int64
		body   string
	}
	got := make(chan seen, 1)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("backend read: %v", err)
		}
		got <- seen{r.ContentLength, string(b)}
	}))
	defer backend.Close()
	proxy := startProxy(t, backend.URL)

	const msg = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	pr, pw := io.Pipe()
	go func() {
		io.WriteString(pw, msg[:10])
		io.WriteString(pw, msg[10:])
		pw.Close()
	}()
	resp, err := http.Post(proxy+"/mcp", "application/json", pr) // chunked: no length
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s := <-got; s != (seen{int64(len(msg)), msg}) {
		t.Fatalf("the backend saw %+v, want the whole body with its length", s)
	}

	big := strings.NewReader(strings.Repeat("x", maxBody+1))
	resp, err = http.Post(proxy+"/mcp", "application/json", big)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body over %d bytes: status %d, want 413", maxBody, resp.StatusCode)
	}
}

// An event reaches the client while the backend's response is still open:
// the proxy does not buffer SSE streams.
func TestProxyFlushesEventsAsTheyCome(t *testing.T) {
	release := make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "data: second\n\n")
	}))
	defer backend.Close()
	proxy := startProxy(t, backend.URL)

	// The deadline only keeps a buffering proxy from hanging the test.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, proxy+"/mcp", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body := bufio.NewReader(resp.Body)
	if line, err := body.ReadString('\n'); err != nil || line != "data: first\n" {
		t.Fatalf("first line %q, %v: want the first event before the backend finishes", line, err)
	}
	close(release)
	rest, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	if string(rest) != "\ndata: second\n\n" {
		t.Fatalf("rest of the stream %q", rest)
	}
}

// A real go-sdk client reaches a real go-sdk server that demands the key.
func TestGoSDKClientThroughTheProxy(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "behind-auth", Version: "v1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "greet"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct{ Name string }) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello " + in.Name}}}, nil, nil
	})
	verify := func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		if token != testKey {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: "conformance"}, nil
	}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	backend := httptest.NewServer(auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(handler))
	defer backend.Close()

	direct, err := http.Post(backend.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	direct.Body.Close()
	if direct.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the backend answered %d without a key, want 401: the test would prove nothing", direct.StatusCode)
	}

	proxy := startProxy(t, backend.URL)
	client := mcp.NewClient(&mcp.Implementation{Name: "conformance-client", Version: "v1"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: proxy}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"Name": "proxy"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "hello proxy" {
		t.Fatalf("tool result %+v", res.Content)
	}
}

func TestLoopbackTarget(t *testing.T) {
	for _, tc := range []struct {
		target string
		ok     bool
	}{
		{"http://127.0.0.1:8931", true},
		{"http://localhost:8931", true},
		{"http://[::1]:8931", true},
		{"", false},
		{"https://127.0.0.1:8931", false},
		{"http://10.0.0.1:8931", false},
		{"http://example.com", false},
		{"127.0.0.1:8931", false},
	} {
		_, err := loopbackTarget(tc.target)
		if (err == nil) != tc.ok {
			t.Errorf("loopbackTarget(%q): err %v, want ok=%v", tc.target, err, tc.ok)
		}
	}
}

func TestRunRefusesToLeaveLoopback(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "agent.key")
	if err := os.WriteFile(keyFile, []byte(testKey), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "empty.key")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"listen beyond loopback", []string{"-target", "http://127.0.0.1:1", "-key-file", keyFile, "-listen", "0.0.0.0:0"}, "not a loopback address"},
		{"target beyond loopback", []string{"-target", "http://192.0.2.1:80", "-key-file", keyFile}, "not on loopback"},
		{"no key file", []string{"-target", "http://127.0.0.1:1"}, "-key-file is required"},
		{"empty key", []string{"-target", "http://127.0.0.1:1", "-key-file", empty}, "is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run(t.Context(), tc.args, io.Discard, slog.New(slog.DiscardHandler))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
