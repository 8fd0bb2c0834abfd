// Command bearerproxy is test equipment for the conformance run: a loopback
// reverse proxy that adds "Authorization: Bearer KEY" to every request and
// forwards it to the gateway. The conformance CLI sends no credentials and
// taskgate never serves without them, so the proxy supplies an API key the
// run created; nothing in taskgate is switched off for the suite.
//
// It passes the client's Host and Origin headers through unchanged, because
// the dns-rebinding-protection scenario sends bad ones on purpose and expects
// the gateway itself to refuse them, and it flushes every write at once so
// SSE streams flow. It must never listen on or forward to anything but
// loopback, and nothing in taskgate imports it.
//
// Usage:
//
//	bearerproxy -target http://127.0.0.1:8931 -key-file agent.key [-listen 127.0.0.1:0]
//
// Once it listens it prints "bearerproxy listening at http://ADDR" on stdout.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/taskgate/taskgate/internal/loopback"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(ctx, os.Args[1:], os.Stdout, log); err != nil {
		fmt.Fprintln(os.Stderr, "bearerproxy:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends.
func run(ctx context.Context, args []string, stdout io.Writer, log *slog.Logger) error {
	fs := flag.NewFlagSet("bearerproxy", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "the loopback address to listen on")
	target := fs.String("target", "", "the gateway's base URL on loopback, e.g. http://127.0.0.1:8931")
	keyFile := fs.String("key-file", "", "a file holding the API key to send as the bearer token")
	if err := fs.Parse(args); err != nil {
		return err
	}
	to, err := loopbackTarget(*target)
	if err != nil {
		return err
	}
	if *keyFile == "" {
		return errors.New("-key-file is required: the API key the proxy adds to every request")
	}
	raw, err := os.ReadFile(*keyFile)
	if err != nil {
		return fmt.Errorf("read the API key: %w", err)
	}
	key := strings.TrimSpace(string(raw))
	if key == "" {
		return fmt.Errorf("the key file %s is empty: write the key from taskgate keys create into it", *keyFile)
	}
	if !loopback.Host(*listen) {
		return fmt.Errorf("-listen %s is not a loopback address: the proxy adds a credential to every request and must stay on this machine", *listen)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *listen, err)
	}
	srv := &http.Server{
		Handler:           newProxy(to, key, log),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "bearerproxy listening at http://%s\n", ln.Addr())
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	// The run is over when the proxy is told to stop: open SSE streams never
	// end on their own, so they are cut rather than waited for.
	return srv.Close()
}

// maxBody bounds a request body the proxy holds; the gateway's own limit
// (max_body_bytes, 1 MiB by default) is far below it and answers first.
const maxBody = 16 << 20

// newProxy forwards every request to target with the bearer key, keeping the
// client's Host and Origin.
//
// It reads each request body whole before forwarding it. Streamed, a body
// still being read when the response headers were flushed back now and then
// closed the upstream connection mid-response, and the client got a 200 with
// an empty body (about one caching scenario in fifty; none in 200 since).
func newProxy(target *url.URL, key string, log *slog.Logger) http.Handler {
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			// SetURL replaces Host with the target's; the gateway must judge
			// the client's own.
			r.Out.Host = r.In.Host
			r.Out.Header.Set("Authorization", "Bearer "+key)
		},
		FlushInterval: -1,
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
			if err != nil {
				http.Error(w, fmt.Sprintf("bearerproxy: read the request body: %v", err), http.StatusRequestEntityTooLarge)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
			r.TransferEncoding = nil
		}
		proxy.ServeHTTP(w, r)
	})
}

// loopbackTarget parses the gateway's base URL and refuses anything that
// would carry the key off this machine.
func loopbackTarget(s string) (*url.URL, error) {
	if s == "" {
		return nil, errors.New("-target is required: the gateway's base URL, e.g. http://127.0.0.1:8931")
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("-target %q is not a URL: %w", s, err)
	}
	if u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("-target %q must be an http URL with a host, e.g. http://127.0.0.1:8931", s)
	}
	if !loopback.Host(u.Host) {
		return nil, fmt.Errorf("-target %q is not on loopback: the proxy sends an API key and must stay on this machine", s)
	}
	return u, nil
}
