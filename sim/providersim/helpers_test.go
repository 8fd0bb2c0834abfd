package providersim

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The two protocol eras a plain tools/call must work in.
const (
	eraModern = "2026-07-28"
	eraLegacy = "2025-11-25"
)

var eras = []string{eraModern, eraLegacy}

// shortJob keeps tests fast; jobs still pass through every state.
const shortJob = 20 * time.Millisecond

// testCtx bounds one test's calls.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// startHTTP serves a new Sim on 127.0.0.1. Cleanups run in reverse: client
// sessions close first, then the Sim (releasing any withheld answer), then the
// HTTP server.
func startHTTP(t *testing.T, opts *Options) (*Sim, string) {
	t.Helper()
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.HTTPHandler())
	t.Cleanup(srv.Close)
	t.Cleanup(func() { s.Close() })
	return s, srv.URL
}

// headerTransport adds fixed headers to every request.
type headerTransport struct {
	header http.Header
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.header {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

// connectHTTP connects a go-sdk client in the given era and checks that the
// era was negotiated.
func connectHTTP(t *testing.T, baseURL, era string, header http.Header) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "providersim-test", Version: "1.0.0"}, nil)
	transport := &mcp.StreamableClientTransport{
		Endpoint:   baseURL + "/mcp",
		HTTPClient: &http.Client{Transport: headerTransport{header: header}},
	}
	cs, err := client.Connect(testCtx(t), transport, &mcp.ClientSessionOptions{ProtocolVersion: era})
	if err != nil {
		t.Fatalf("connecting in era %s: %v", era, err)
	}
	t.Cleanup(func() { cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != era {
		t.Fatalf("negotiated protocol %s, want %s", got, era)
	}
	return cs
}

// connectInMemory connects a client to s.Server() over in-memory transports.
func connectInMemory(t *testing.T, s *Sim) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.Server().Connect(testCtx(t), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "providersim-test", Version: "1.0.0"}, nil).Connect(testCtx(t), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// serveStdio serves s over a pair of pipes as ServeStdio does over a
// process's stdin and stdout. It returns the client's end, and a function
// to call after the client hung up that checks ServeStdio then returned
// cleanly.
func serveStdio(t *testing.T, s *Sim) (*mcp.IOTransport, func(ctx context.Context)) {
	t.Helper()
	serverIn, clientOut := io.Pipe()
	clientIn, serverOut := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- s.ServeStdio(t.Context(), serverIn, serverOut) }()
	return &mcp.IOTransport{Reader: clientIn, Writer: clientOut}, func(ctx context.Context) {
		t.Helper()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("ServeStdio after the client hung up = %v, want nil", err)
			}
		case <-ctx.Done():
			t.Fatal("ServeStdio did not return after the client hung up")
		}
	}
}

// call calls a tool and fails the test on a protocol error.
func call(ctx context.Context, t *testing.T, cs *mcp.ClientSession, name string, args any, meta mcp.Meta) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args, Meta: meta})
	if err != nil {
		t.Fatalf("%s(%v): %v", name, args, err)
	}
	return res
}

// structured decodes a result's structuredContent.
func structured[T any](t *testing.T, res *mcp.CallToolResult) T {
	t.Helper()
	var out T
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("decoding structuredContent %s: %v", data, err)
	}
	return out
}

// text joins a result's text content.
func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// runSuite calls run_suite and decodes its result.
func runSuite(ctx context.Context, t *testing.T, cs *mcp.ClientSession, args RunSuiteArgs, meta mcp.Meta) (SuiteResult, *mcp.CallToolResult) {
	t.Helper()
	res := call(ctx, t, cs, ToolRunSuite, args, meta)
	return structured[SuiteResult](t, res), res
}

// jobWithStatus reports whether the record holds job id in the given status.
func jobWithStatus(s *Sim, id string, status JobStatus) bool {
	for _, j := range s.Jobs() {
		if j.ID == id {
			return j.Status == status
		}
	}
	return false
}

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
