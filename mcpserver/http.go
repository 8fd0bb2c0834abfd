package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/taskwire"
)

// HTTPOptions configure Handler.
type HTTPOptions struct {
	// Auth authenticates every request to /mcp and to Extra; required.
	Auth *authn.Authenticator
	// Gatherer serves /metrics; nil disables it.
	Gatherer prometheus.Gatherer
	// Extra registers more authenticated routes (the REST API).
	Extra func(mux *http.ServeMux)
}

// Handler returns the gateway's HTTP surface: MCP at /mcp, RFC 9728
// metadata, /healthz, /readyz, /metrics and the authenticated Extra routes.
func (g *Gateway) Handler(server *mcp.Server, opts *HTTPOptions) (http.Handler, error) {
	if opts == nil || opts.Auth == nil {
		return nil, errors.New("mcpserver: an authenticator is required for HTTP")
	}
	mcpHandler := taskwire.NewHTTPHandler(server, &taskwire.HTTPOptions{Streamable: mcp.StreamableHTTPOptions{
		Logger: g.log,
	}})
	mux := http.NewServeMux()
	mux.Handle("/mcp", opts.Auth.Middleware(limitBody(g.cfg.MaxBodyBytes, g.forwardPassThrough(trackDelivery(g, mcpHandler)))))
	mux.Handle(opts.Auth.MetadataPath(), opts.Auth.MetadataHandler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", g.ready)
	if opts.Gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(opts.Gatherer, promhttp.HandlerOpts{}))
	}
	if opts.Extra != nil {
		api := http.NewServeMux()
		opts.Extra(api)
		mux.Handle("/v1/", opts.Auth.Middleware(limitBody(g.cfg.MaxBodyBytes, api)))
	}
	return mux, nil
}

// ready answers 200 only when the ledger and every required upstream answer.
func (g *Gateway) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	checks := map[string]string{}
	ok := true
	if _, err := g.store.OperationCount(ctx, []ledger.State{ledger.StateAccepted}); err != nil {
		checks["ledger"], ok = err.Error(), false
	} else {
		checks["ledger"] = "ok"
	}
	for _, u := range g.pool.All() {
		if !u.Config().IsRequired() {
			continue
		}
		if err := u.Ready(ctx); err != nil {
			checks["upstream "+u.Name()], ok = err.Error(), false
		} else {
			checks["upstream "+u.Name()] = "ok"
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"ready": ok, "checks": checks})
}

func limitBody(n int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > n {
			http.Error(w, fmt.Sprintf("request body of %d bytes exceeds the limit of %d", r.ContentLength, n), http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, n)
		next.ServeHTTP(w, r)
	})
}

// delivery collects the attempts answered by one HTTP request, so that
// whether the response reached the client is recorded once it is written.
type delivery struct {
	mu  sync.Mutex
	ids []string
	// result is set once the request is over; an attempt answered after
	// that (its handler outlived the request) gets it at once.
	result ledger.ClientResult
}

// add queues id for the request's result, or returns the result if the
// request is already over.
func (d *delivery) add(id string) ledger.ClientResult {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.result == "" {
		d.ids = append(d.ids, id)
	}
	return d.result
}

// finish settles the request's result and returns the attempts queued for it.
func (d *delivery) finish(r ledger.ClientResult) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.result = r
	ids := d.ids
	d.ids = nil
	return ids
}

type deliveryKey struct{}

func deliveryFrom(ctx context.Context) *delivery {
	d, _ := ctx.Value(deliveryKey{}).(*delivery)
	return d
}

// deliveryHeader carries the key of each /mcp request's delivery. A
// 2025-11-25 session runs every handler with the context of the request
// that opened the session, so the delivery cannot travel in the context;
// the request's headers reach the handler. A client's own value is replaced.
const deliveryHeader = "Taskgate-Delivery"

// withDelivery makes ctx carry the delivery of the request whose headers
// are h, and no other request's.
func (g *Gateway) withDelivery(ctx context.Context, h http.Header) context.Context {
	v, _ := g.deliveries.Load(h.Get(deliveryHeader))
	d, _ := v.(*delivery)
	return context.WithValue(ctx, deliveryKey{}, d)
}

// trackDelivery records, for every attempt a request answered, whether the
// response was written before the client went away.
func trackDelivery(g *Gateway, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := &delivery{}
		key := rand.Text()
		g.deliveries.Store(key, d)
		defer g.deliveries.Delete(key)
		r = r.Clone(r.Context())
		r.Header.Set(deliveryHeader, key)
		tw := &trackingWriter{ResponseWriter: w}
		next.ServeHTTP(tw, r)
		result := ledger.ClientDelivered
		if tw.failed || r.Context().Err() != nil {
			result = ledger.ClientDisconnected
		}
		for _, id := range d.finish(result) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := g.store.AttemptSetClientResult(ctx, id, result); err != nil {
				g.log.Warn("record client result", "request_id", id, "client_result", result, "err", err)
			}
			cancel()
		}
	})
}

// trackingWriter notices a response that could not be written.
type trackingWriter struct {
	http.ResponseWriter
	failed bool
}

func (t *trackingWriter) Write(b []byte) (int, error) {
	n, err := t.ResponseWriter.Write(b)
	if err != nil {
		t.failed = true
	}
	return n, err
}

func (t *trackingWriter) Flush() {
	if f, ok := t.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (t *trackingWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }
