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

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/limits"
	"github.com/taskgate/taskgate/signingkeys"
	"github.com/taskgate/taskgate/taskwire"
)

// Authenticator is what the HTTP surface needs of authentication: an
// *authn.Authenticator, or an *authn.Switch that a reload can change.
type Authenticator interface {
	Middleware(next http.Handler) http.Handler
	MetadataPath() string
	MetadataHandler() http.Handler
}

// HTTPOptions configure Handler.
type HTTPOptions struct {
	// Auth authenticates every request to /mcp and to Extra; required.
	Auth Authenticator
	// Gatherer serves /metrics; nil disables it.
	Gatherer prometheus.Gatherer
	// Extra registers more authenticated routes (the REST API).
	Extra func(mux *http.ServeMux)
	// ReceiptKeys serves the JWK Set of the receipt-signing keys at
	// signingkeys.JWKSPath, unauthenticated: a verifier needs no
	// credential. Nil serves nothing there.
	ReceiptKeys http.Handler
	// Console serves the approvers' pages at /console and below; it does
	// its own authentication, from its session cookie. Nil serves nothing
	// there.
	Console http.Handler
	// Limits holds what each tenant and source address may take; nil
	// makes one of the configuration's limits.
	Limits *limits.Keeper
}

// NewKeeper returns the keeper of cfg's limits, registering its metrics
// on reg when it is not nil.
func NewKeeper(l config.Limits, reg prometheus.Registerer) *limits.Keeper {
	return limits.New(limits.Options{
		Sessions:       limits.Bound{PerTenant: l.SessionsPerTenant, Total: l.Sessions},
		Streams:        limits.Bound{PerTenant: l.StreamsPerTenant, Total: l.Streams},
		CallsPerTenant: l.CallsPerTenant, CallRate: l.CallRate, CallBurst: l.CallBurst,
		RefusalDelay: l.RefusalDelay, JobsPerTenant: l.JobsPerTenant, AcceptsPerTenant: l.AcceptsPerTenant, SignInsPerMinute: l.SignInsPerMinute, Registerer: reg,
	})
}

// Sessions (protocol 2025-11-25 and earlier) are tied to a replica's
// memory; these, with limits.session_idle, bound how long a client that
// went away keeps one.
const (
	// keepAlive pings a session's client this often over its standalone
	// stream; keepAliveMisses unanswered pings in a row close the session.
	keepAlive       = time.Minute
	keepAliveMisses = 3
)

// Handler returns the gateway's HTTP surface: MCP at /mcp (refusing a
// browser origin that is not allowed, see originAllowed), RFC 9728
// metadata, the receipt-signing keys, /healthz, /readyz, /metrics, the
// authenticated Extra routes and the console.
// It makes its own MCP servers: one for sessions, whose clients are pinged
// and whose idle sessions end, and one for stateless 2026-07-28 requests,
// whose handlers end when their HTTP request does.
func (g *Gateway) Handler(opts *HTTPOptions) (http.Handler, error) {
	if opts == nil || opts.Auth == nil {
		return nil, errors.New("mcpserver: an authenticator is required for HTTP")
	}
	lim := g.config().Limits
	keeper := opts.Limits
	if keeper == nil {
		keeper = NewKeeper(lim, nil)
	}
	sessionIdle := lim.SessionIdle
	sessions, err := g.newServer("", &mcp.ServerOptions{KeepAlive: keepAlive, KeepAliveFailureThreshold: keepAliveMisses})
	if err != nil {
		return nil, err
	}
	stateless, err := g.newServer("", nil)
	if err != nil {
		return nil, err
	}
	mcpHandler := taskwire.NewHTTPHandler(sessions, &taskwire.HTTPOptions{
		Streamable: mcp.StreamableHTTPOptions{
			Logger:                       g.log,
			SessionTimeout:               sessionIdle,
			PropagateRequestCancellation: true,
		},
		StatelessServer: stateless,
	})
	mux := http.NewServeMux()
	calls := trackDelivery(g, mcpHandler)
	if !g.sdkPathOnly {
		// Only relaying needs the sessions followed; the SDK path keeps its own.
		calls = g.forwardPassThrough(newLegacySessions(sessions, sessionIdle, g.clock), calls)
	}
	origins := allowedOrigins(g.config().PublicURL, g.config().AllowedOrigins)
	admitted := g.admit(keeper, sessions, calls)
	mux.Handle("/mcp", streamWrites(lim.WriteTimeout, g.countRequests(checkOrigin(origins, opts.Auth.Middleware(limitBody(g.config().MaxBodyBytes, admitted))))))
	mux.Handle(opts.Auth.MetadataPath(), opts.Auth.MetadataHandler())
	if opts.ReceiptKeys != nil {
		mux.Handle(signingkeys.JWKSPath, opts.ReceiptKeys)
	}
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
		mux.Handle("/v1/", opts.Auth.Middleware(limitBody(g.config().MaxBodyBytes, api)))
	}
	if opts.Console != nil {
		console := limitSignIns(keeper, limitBody(g.config().MaxBodyBytes, opts.Console))
		mux.Handle("/console", console)
		mux.Handle("/console/", console)
	}
	return mux, nil
}

// ready answers 200 only when the ledger and every required upstream answer,
// and each required upstream's tools are published: a client sent here by
// a load balancer finds the tools it calls. It is unauthenticated, so it
// says only "ok" or "unavailable" for each; why something is unavailable
// (errors naming URLs with credentials, commands, database hosts) goes to
// the log.
func (g *Gateway) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	checks := map[string]string{}
	ok := true
	check := func(name string, err error) {
		if err != nil {
			g.log.Warn("not ready", "check", name, "err", err)
			checks[name], ok = "unavailable", false
			return
		}
		checks[name] = "ok"
	}
	_, err := g.store.OperationCount(ctx, []ledger.State{ledger.StateAccepted})
	check("ledger", err)
	for _, u := range g.pool.All() {
		if u.Config().IsRequired() {
			err := u.Ready(ctx)
			if err == nil && !g.hasListedTools(u) {
				err = fmt.Errorf("upstream %s is connected but its tools are not listed yet", u.Name())
			}
			check("upstream "+u.Name(), err)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"ready": ok, "checks": checks})
}

// countRequests counts the /mcp requests in progress for Drain, all but a
// session's standalone stream (GET), which lasts as long as its session.
// A standalone stream ends instead when the gateway shuts down: it carries
// nothing a client waits for, and it would hold the listener open until
// its grace period ran out.
func (g *Gateway) countRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			ctx, cancel := context.WithCancel(r.Context())
			defer context.AfterFunc(g.stopping, cancel)()
			defer cancel()
			next.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		g.handling.start()
		defer g.handling.done()
		next.ServeHTTP(w, r)
	})
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
	// ctx ends when the request is over: answered, or its client gone.
	ctx context.Context
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

// requestContext makes ctx carry the delivery of the request whose headers
// are h, and no other request's, and end when that request is over or the
// gateway shuts down. A 2025-11-25 session runs handlers with a context
// that outlives their request; a wait for a client that went away must not.
func (g *Gateway) requestContext(ctx context.Context, h http.Header) (context.Context, context.CancelFunc) {
	v, _ := g.deliveries.Load(h.Get(deliveryHeader))
	d, _ := v.(*delivery)
	ctx, cancel := context.WithCancel(context.WithValue(ctx, deliveryKey{}, d))
	stops := []func() bool{context.AfterFunc(g.stopping, cancel)}
	if d != nil {
		stops = append(stops, context.AfterFunc(d.ctx, cancel))
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// trackDelivery records, for every attempt a request answered, whether the
// response was written before the client went away.
func trackDelivery(g *Gateway, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, over := context.WithCancel(r.Context())
		defer over()
		d := &delivery{ctx: ctx}
		key := rand.Text()
		g.deliveries.Store(key, d)
		defer g.deliveries.Delete(key)
		r = r.Clone(r.Context())
		r.Header.Set(deliveryHeader, key)
		tw := &trackingWriter{ResponseWriter: w}
		next.ServeHTTP(tw, r)
		over()
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
