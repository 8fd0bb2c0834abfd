package upstream

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestProgressTapBoundsAnEvent: the tap reading an upstream's event stream
// gives up on an event once it passes the size limit, instead of reading a
// line that never ends into memory.
func TestProgressTapBoundsAnEvent(t *testing.T) {
	var written atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		if _, err := io.WriteString(w, "data: "); err != nil {
			return
		}
		chunk := []byte(strings.Repeat("a", 64<<10))
		for written.Load() < 64<<20 {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := &http.Client{Transport: &roundTripper{
		next: http.DefaultTransport, progress: &progressRouter{sinks: map[string]*progressSink{}}, suspect: func() {},
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("reading an endless event: %v; want an error once %d bytes are passed", err, mcp.DefaultMaxEventSize)
	}
	if n := written.Load(); n >= 48<<20 {
		t.Errorf("the upstream wrote %d MiB before the tap gave up; want little more than the %d MiB limit", n>>20, mcp.DefaultMaxEventSize>>20)
	}
}
