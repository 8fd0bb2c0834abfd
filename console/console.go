// Package console serves the approvers' pages under /console: sign-in with
// an approver credential, the inbox of approval requests with their approve
// and decline forms, each approval request's own page (where a URL-mode
// elicitation sends the user to decide it), each operation with its
// lineage, remote jobs, charges and next actions, and its receipt rendered
// as a page (the issued version, its signature and history, or the
// provisional receipt) with each issued version's DSSE envelope to
// download.
//
// The pages are html/template, rendered on the server, with their one
// stylesheet embedded; they carry no script at all, and the
// Content-Security-Policy forbids any. A session is the approver's
// credential sealed into an HttpOnly, SameSite=Strict cookie under the
// daemon's keys, so any replica holding those keys serves it; the
// credential goes through the same authentication as the REST API on every
// request, so a revoked key signs out within that authentication's key
// cache. Every form that changes something carries the session's CSRF
// token, and approving or declining goes through the REST API's handlers,
// with its rules and its errors.
//
// The console must never hold a session anywhere but the cookie, show
// another tenant's requests or operations (the tenant comes from the
// credential only), or accept an agent's credential.
package console

import (
	"bytes"
	"cmp"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/ledger"
)

// Prefix is the path the console is served under.
const Prefix = "/console"

// csrfField is the form field that carries the session's CSRF token.
const csrfField = "csrf"

// contentSecurityPolicy allows the console's own stylesheet and images
// and nothing else: no script from anywhere, no framing, forms only to
// itself.
const contentSecurityPolicy = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Authenticator is what the console needs of authentication: the
// middleware the REST API runs behind (*authn.Authenticator or
// *authn.Switch).
type Authenticator interface {
	Middleware(next http.Handler) http.Handler
}

// Options configure [New].
type Options struct {
	// Auth checks the signed-in credential on every request. Required.
	Auth Authenticator
	// API serves the REST API's routes without authentication in front
	// (a mux that api.API.Register filled): the console calls it with the
	// approver's authenticated request context to decide approval
	// requests. Required.
	API http.Handler
	// Store is the ledger the pages read. Required.
	Store ledger.Store
	// Sealer seals sessions. Required.
	Sealer Sealer
	// Secure marks the cookie Secure; set it when the public URL is https.
	Secure bool
	// SessionLife is how long a sign-in lasts; zero means
	// DefaultSessionLife.
	SessionLife time.Duration
	// Clock is the time sessions and pages are reckoned in; nil means
	// time.Now.
	Clock func() time.Time
	// Logger receives failures the approver is not shown the details of;
	// nil discards.
	Logger *slog.Logger
}

// Console serves the pages. It is safe for concurrent use.
type Console struct {
	api    http.Handler
	store  ledger.Store
	sealer Sealer
	secure bool
	life   time.Duration
	clock  func() time.Time
	log    *slog.Logger
	// authed is the authentication middleware in front of the console's
	// own handler, built once: a request goes through it with the
	// session's credential as its bearer token.
	authed http.Handler
	pages  *http.ServeMux
	tmpl   *templates
}

// New returns the console over opts.
func New(opts *Options) (*Console, error) {
	if opts == nil || opts.Auth == nil || opts.API == nil || opts.Store == nil || opts.Sealer == nil {
		return nil, errors.New("console: an authenticator, the REST API, a ledger store and a sealer are required")
	}
	tmpl, err := parseTemplates()
	if err != nil {
		return nil, err
	}
	c := &Console{api: opts.API, store: opts.Store, sealer: opts.Sealer, secure: opts.Secure, life: opts.SessionLife,
		clock: opts.Clock, log: opts.Logger, tmpl: tmpl, pages: http.NewServeMux()}
	if c.life <= 0 {
		c.life = DefaultSessionLife
	}
	if c.clock == nil {
		c.clock = time.Now
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.authed = opts.Auth.Middleware(http.HandlerFunc(c.authenticated))
	c.routes()
	return c, nil
}

// Handler serves the console; mount it at Prefix and Prefix+"/".
func (c *Console) Handler() http.Handler { return http.HandlerFunc(c.serve) }

// gate is how one request crossed authentication: the writer the page is
// to be written to, whether the credential got through, and for a sign-in
// the session to start.
type gate struct {
	w       http.ResponseWriter
	reached bool
	signIn  *session
	// next is where a sign-in goes once it succeeds; "" for the inbox.
	next string
}

type gateKey struct{}

func (c *Console) serve(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	if strings.HasPrefix(r.URL.Path, Prefix+"/assets/") {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			c.fail(w, r, nil, http.StatusMethodNotAllowed, "only GET is allowed on the console's assets")
			return
		}
		serveAsset(w, r)
		return
	}
	h.Set("Cache-Control", "no-store")
	if r.Method == http.MethodPost && !sameOrigin(r) {
		c.fail(w, r, nil, http.StatusForbidden, "this form was sent from another site; the console accepts forms from its own pages only")
		return
	}
	if r.URL.Path == Prefix+"/sign-in" {
		c.signIn(w, r)
		return
	}
	s, err := c.readSession(r, c.clock())
	if err != nil {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			http.Redirect(w, r, signInPath(r.URL.Path), http.StatusSeeOther)
			return
		}
		c.signInPage(w, r, http.StatusUnauthorized, err.Error())
		return
	}
	if r.Method == http.MethodPost {
		if !csrfOK(r, s) {
			c.fail(w, r, nil, http.StatusForbidden, "this form carries no valid CSRF token, so it did not come from a console page of this sign-in; reload the page and send it again")
			return
		}
		if r.URL.Path == Prefix+"/sign-out" {
			if err := c.signOut(r, s); err != nil {
				c.fail(w, r, nil, http.StatusServiceUnavailable, err.Error())
				return
			}
			c.clearSession(w)
			http.Redirect(w, r, Prefix+"/sign-in", http.StatusSeeOther)
			return
		}
	}
	c.throughAuth(w, r, s.Credential, &gate{w: w}, s)
}

// throughAuth sends r through authentication with credential as its
// bearer token; what got through is served by authenticated, what did not
// is answered with the sign-in page and authentication's own reason. s is
// the session r came with, nil for a sign-in.
func (c *Console) throughAuth(w http.ResponseWriter, r *http.Request, credential string, g *gate, s *session) {
	ar := r.Clone(r.Context())
	ar.Header.Set("Authorization", "Bearer "+credential)
	ar = ar.WithContext(withGate(ar.Context(), g, s))
	var refused buffer
	c.authed.ServeHTTP(&refused, ar)
	if g.reached {
		return
	}
	status := refused.status
	if status == 0 || status == http.StatusOK {
		status = http.StatusUnauthorized
	}
	msg := strings.TrimSpace(refused.body.String())
	if msg == "" {
		msg = http.StatusText(status)
	}
	if s != nil && status == http.StatusUnauthorized {
		c.clearSession(w)
		msg = "your sign-in has ended: " + msg
	}
	c.signInPage(w, r, status, msg)
}

// authenticated runs behind authentication: it refuses a credential that
// is not an approver's, starts the session of a sign-in, and serves the
// pages.
func (c *Console) authenticated(_ http.ResponseWriter, r *http.Request) {
	g, s := gateFrom(r.Context())
	g.reached = true
	ti := auth.TokenInfoFromContext(r.Context())
	if !authn.HasScope(ti, authn.ScopeApprove) {
		if s != nil {
			c.clearSession(g.w)
		}
		c.signInPage(g.w, r, http.StatusForbidden, "the console is for approvers: sign in with an API key of role approver "+
			"(taskgate keys create --role approver) or an OAuth token with scope "+authn.ScopeApprove+
			"; the credential sent may call tools and read approvals and receipts only")
		return
	}
	if g.signIn != nil {
		if err := c.setSession(g.w, g.signIn); err != nil {
			c.fail(g.w, r, nil, http.StatusInternalServerError, "could not start the session; the gateway log has the details")
			c.log.ErrorContext(r.Context(), "console sign-in", "err", err)
			return
		}
		c.log.InfoContext(r.Context(), "console sign-in", "tenant", authn.TenantOf(ti), "credential", authn.CredentialID(ti))
		http.Redirect(g.w, r, cmp.Or(g.next, Prefix+"/inbox"), http.StatusSeeOther)
		return
	}
	c.pages.ServeHTTP(g.w, r.WithContext(withViewer(r.Context(), &viewer{
		tenant: authn.TenantOf(ti), credential: authn.CredentialID(ti), csrf: s.CSRF,
	})))
}

func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		c.render(w, r, "signin", http.StatusOK, &page{Title: "Sign in", Data: returnTo(r.URL.Query().Get("next"))})
	case http.MethodPost:
		credential := strings.TrimSpace(r.PostFormValue("credential"))
		if credential == "" {
			c.signInPage(w, r, http.StatusBadRequest, "enter an approver API key or an OAuth token with scope "+authn.ScopeApprove)
			return
		}
		expires := c.clock().Add(c.life)
		c.throughAuth(w, r, credential, &gate{w: w, signIn: newSession(credential, expires), next: returnTo(r.PostFormValue("next"))}, nil)
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		c.fail(w, r, nil, http.StatusMethodNotAllowed, r.Method+" is not allowed on the sign-in page")
	}
}

// sameOrigin reports whether a form post came from this host: browsers
// send Origin on every POST, and Sec-Fetch-Site where they support it.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host == r.Host
}

// buffer holds the answer of an authentication that refused a request.
type buffer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *buffer) Header() http.Header {
	if b.header == nil {
		b.header = http.Header{}
	}
	return b.header
}

func (b *buffer) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}

func (b *buffer) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}
