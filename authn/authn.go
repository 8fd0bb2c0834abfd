// Package authn holds how taskgate turns a downstream bearer credential into a
// tenant: taskgate API keys (looked up by hash in the ledger) and OAuth 2.1
// bearer JWTs verified against a configured issuer's JWKS. It also holds the
// HTTP pieces that tell a client how to authenticate: RFC 9728 protected
// resource metadata and the WWW-Authenticate challenge on 401.
//
// The tenant is always derived from authentication, never from a request
// body. [Authenticator.Verify] is a go-sdk [auth.TokenVerifier]; behind
// [Authenticator.Middleware] a go-sdk MCP handler finds the result in
// req.Extra.TokenInfo, and [TenantOfRequest] reads the tenant from it.
//
// authn must never log, echo or store a bearer token or API key in the clear
// (only an API key's SHA-256 is stored), and it never sees or forwards
// upstream credentials: the downstream Authorization header is removed before
// the wrapped handler runs, so nothing downstream of it can pass it through.
package authn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/taskgate/taskgate/internal/loopback"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/ledger"
)

// Methods recorded in TokenInfo.Extra["method"].
const (
	MethodAPIKey = "api_key"
	MethodJWT    = "jwt"
)

// Keys of TokenInfo.Extra set by [Authenticator.Verify].
const (
	// ExtraTenant holds the tenant (a string), the same value as UserID.
	ExtraTenant = "tenant"
	// ExtraMethod holds [MethodAPIKey] or [MethodJWT].
	ExtraMethod = "method"
	// ExtraKeyID holds the ledger ID of an API key (int64) or the kid of
	// the key that signed a JWT (string, "" if the token named none).
	ExtraKeyID = "key_id"
	// ExtraSubject holds a JWT's sub claim, when it has one.
	ExtraSubject = "subject"
)

// ScopeApprove is the scope a credential needs to create or revoke
// approvals: API keys of role approver carry it, and JWTs carry it in their
// scope (or scp) claim. Calling tools needs no scope.
const ScopeApprove = "taskgate:approve"

// HasScope reports whether ti was granted scope.
func HasScope(ti *auth.TokenInfo, scope string) bool {
	return ti != nil && slices.Contains(ti.Scopes, scope)
}

// maxTenantLen bounds a tenant name (ledger.CheckTenant).
const maxTenantLen = ledger.MaxTenantBytes

// Options configure [New].
type Options struct {
	// Store holds API keys. Nil disables API keys.
	Store ledger.Store
	// JWT configures OAuth bearer JWTs. Nil disables JWTs.
	JWT *JWTOptions
	// ResourceURL is this gateway's MCP resource URL, e.g.
	// https://gw.example.com/mcp. It is the resource in the RFC 9728
	// metadata and decides where that metadata is served. Required; https,
	// or http on a loopback host.
	ResourceURL string
	// Logger receives rejections and JWKS fetches, never a token. Nil
	// discards.
	Logger *slog.Logger
	// Clock is the time used to check JWT times and JWKS refetch limits.
	// Nil means time.Now.
	Clock func() time.Time
	// HTTPClient fetches the JWKS. Nil means a client with a 10s timeout.
	HTTPClient *http.Client
}

// JWTOptions configure OAuth 2.1 bearer JWT verification.
type JWTOptions struct {
	// Issuer must equal the token's iss exactly. Required.
	Issuer string
	// Audience must be one of the token's aud values. Required; usually
	// the ResourceURL.
	Audience string
	// JWKSURL is where the issuer publishes its signing keys. Required;
	// https, or http on a loopback host.
	JWKSURL string
	// TenantClaim names the claim holding the tenant. Empty means "sub".
	TenantClaim string
	// Algorithms are the accepted signature algorithms. Empty means RS256
	// and ES256. Only asymmetric algorithms are accepted: RS256, RS384,
	// RS512, PS256, PS384, PS512, ES256, ES384, ES512.
	Algorithms []string
	// Leeway is the clock skew allowed on exp, nbf and iat. Zero means 30s;
	// at most 5m.
	Leeway time.Duration
	// AuthorizationServers are advertised in the RFC 9728 metadata. Empty
	// means [Issuer].
	AuthorizationServers []string
}

const (
	defaultLeeway = 30 * time.Second
	maxLeeway     = 5 * time.Minute
)

// keyKindFor returns the kind of JWK key that verifies alg, and whether alg
// is accepted at all. Only asymmetric algorithms are: a shared secret cannot
// be published in a JWKS, and "none" proves nothing.
func keyKindFor(alg string) (keyKind, bool) {
	switch alg {
	case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512":
		return keyKind{kty: "RSA"}, true
	case "ES256":
		return keyKind{kty: "EC", crv: "P-256"}, true
	case "ES384":
		return keyKind{kty: "EC", crv: "P-384"}, true
	case "ES512":
		return keyKind{kty: "EC", crv: "P-521"}, true
	}
	return keyKind{}, false
}

// keyKind is the kind of public key an algorithm verifies with.
type keyKind struct{ kty, crv string }

// Authenticator verifies bearer credentials and serves the HTTP pieces of
// authentication. It is safe for concurrent use.
type Authenticator struct {
	store       ledger.Store
	jwt         *jwtVerifier
	resource    *url.URL
	authServers []string
	log         *slog.Logger
	clock       func() time.Time
	// checked holds API keys found in the ledger until they are due to be
	// looked up again.
	checked checkedKeys
}

// New checks opts and returns an Authenticator. Errors name the offending
// field, e.g. "jwt.issuer is required".
func New(opts *Options) (*Authenticator, error) {
	if opts == nil {
		return nil, errors.New("authn options are required: set store, jwt or both, and resource_url")
	}
	o := *opts
	if o.Store == nil && o.JWT == nil {
		return nil, errors.New("store and jwt are both unset: nothing could authenticate; set store for API keys, jwt for OAuth, or both")
	}
	if o.ResourceURL == "" {
		return nil, errors.New("resource_url is required (this gateway's MCP URL, e.g. https://gw.example.com/mcp)")
	}
	resource, err := checkURL(o.ResourceURL)
	if err != nil {
		return nil, fmt.Errorf("resource_url: %w", err)
	}
	if resource.RawQuery != "" || resource.Fragment != "" {
		return nil, fmt.Errorf("resource_url %q must have no query or fragment (RFC 9728 §1.2)", o.ResourceURL)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: jwksFetchTimeout}
	}
	a := &Authenticator{
		store:    o.Store,
		resource: resource,
		log:      o.Logger,
		clock:    o.Clock,
	}
	if o.JWT != nil {
		j, err := normalizeJWT(*o.JWT)
		if err != nil {
			return nil, err
		}
		a.authServers = j.AuthorizationServers
		a.jwt = newJWTVerifier(j, newKeySet(j.JWKSURL, o.HTTPClient, o.Clock, o.Logger), o.Clock)
	}
	return a, nil
}

// normalizeJWT applies defaults to j and checks it.
func normalizeJWT(j JWTOptions) (JWTOptions, error) {
	if j.Issuer == "" {
		return j, errors.New("jwt.issuer is required (the iss your authorization server puts in tokens)")
	}
	if j.Audience == "" {
		return j, errors.New("jwt.audience is required (usually this gateway's resource_url)")
	}
	if j.JWKSURL == "" {
		return j, errors.New("jwt.jwks_url is required (the issuer's jwks_uri)")
	}
	if _, err := checkURL(j.JWKSURL); err != nil {
		return j, fmt.Errorf("jwt.jwks_url: %w", err)
	}
	if j.TenantClaim == "" {
		j.TenantClaim = "sub"
	}
	if len(j.Algorithms) == 0 {
		j.Algorithms = []string{"RS256", "ES256"}
	}
	j.Algorithms = slices.Clone(j.Algorithms)
	for _, alg := range j.Algorithms {
		if _, ok := keyKindFor(alg); ok {
			continue
		}
		switch {
		case strings.EqualFold(alg, "none"):
			return j, errors.New(`jwt.algorithms: "none" is never accepted; unsigned tokens prove nothing`)
		case strings.HasPrefix(strings.ToUpper(alg), "HS"):
			return j, fmt.Errorf("jwt.algorithms: %s is a shared-secret algorithm and is not accepted; use RS256 or ES256", alg)
		default:
			return j, fmt.Errorf("jwt.algorithms: %q is not supported; use RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384 or ES512", alg)
		}
	}
	switch {
	case j.Leeway < 0:
		return j, fmt.Errorf("jwt.leeway must not be negative, got %s", j.Leeway)
	case j.Leeway > maxLeeway:
		return j, fmt.Errorf("jwt.leeway must be at most %s, got %s", maxLeeway, j.Leeway)
	case j.Leeway == 0:
		j.Leeway = defaultLeeway
	}
	if len(j.AuthorizationServers) == 0 {
		if _, err := checkURL(j.Issuer); err != nil {
			return j, fmt.Errorf("jwt.authorization_servers defaults to jwt.issuer, which is not usable: %w; set jwt.authorization_servers", err)
		}
		j.AuthorizationServers = []string{j.Issuer}
	} else {
		j.AuthorizationServers = slices.Clone(j.AuthorizationServers)
		for i, s := range j.AuthorizationServers {
			if _, err := checkURL(s); err != nil {
				return j, fmt.Errorf("jwt.authorization_servers[%d]: %w", i, err)
			}
		}
	}
	return j, nil
}

// checkURL parses an absolute https URL, or an http URL on a loopback host
// (for local use and tests).
func checkURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%q is not a URL: %w", raw, err)
	}
	if u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("%q must be an absolute URL with a host and no user info", raw)
	}
	switch u.Scheme {
	case "https":
		return u, nil
	case "http":
		if loopback.Host(u.Hostname()) {
			return u, nil
		}
		return nil, fmt.Errorf("%q must use https (http is allowed only on a loopback host)", raw)
	default:
		return nil, fmt.Errorf("%q must use https", raw)
	}
}

// Verify turns a bearer token into a tenant. It implements go-sdk's
// [auth.TokenVerifier]. Tokens starting with [APIKeyPrefix] are API keys;
// everything else is a JWT.
//
// The TokenInfo has UserID = tenant (go-sdk binds sessions to it) and Extra
// holding [ExtraTenant], [ExtraMethod] and [ExtraKeyID] (and [ExtraSubject]
// for JWTs), and Scopes holding the granted scopes ([ScopeApprove] for an
// approver API key; a JWT's scope claim). req may be nil; it is not
// consulted. A rejected credential gives an error that unwraps to
// [auth.ErrInvalidToken] and says why without echoing the token; any other
// error means the credential could not be checked (ledger or JWKS
// unavailable).
func (a *Authenticator) Verify(ctx context.Context, token string, req *http.Request) (*auth.TokenInfo, error) {
	if token == "" {
		return nil, fmt.Errorf("%w: the bearer token is empty", auth.ErrInvalidToken)
	}
	if strings.HasPrefix(token, APIKeyPrefix) {
		if a.store == nil {
			return nil, fmt.Errorf("%w: API keys are not enabled on this gateway", auth.ErrInvalidToken)
		}
		return a.verifyAPIKey(ctx, token)
	}
	if a.jwt == nil {
		return nil, fmt.Errorf("%w: the bearer token is not a taskgate API key (%s…) and JWTs are not enabled on this gateway", auth.ErrInvalidToken, APIKeyPrefix)
	}
	return a.jwt.verify(ctx, token)
}

// TenantOf returns the tenant that [Authenticator.Verify] put in ti, or ""
// if ti is nil or carries none.
func TenantOf(ti *auth.TokenInfo) string {
	if ti == nil {
		return ""
	}
	t, _ := ti.Extra[ExtraTenant].(string)
	return t
}

// TenantOfRequest returns the tenant of a go-sdk MCP server request that
// came through [Authenticator.Middleware], or "" if it carries none (for
// example over stdio). It works on typed requests (*mcp.CallToolRequest)
// and in receiving middleware (mcp.Request) alike.
func TenantOfRequest(req mcp.Request) string {
	if req == nil {
		return ""
	}
	extra := req.GetExtra()
	if extra == nil {
		return ""
	}
	return TenantOf(extra.TokenInfo)
}

// checkTenant rejects tenant names that could not be stored, logged and
// shown safely (ledger.CheckTenant): the configuration refuses the same.
func checkTenant(t string) error { return ledger.CheckTenant(t) }
