package authn

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// wellKnownPrefix is RFC 9728's well-known URI for protected resource
// metadata.
const wellKnownPrefix = "/.well-known/oauth-protected-resource"

// errUnavailable is what a client hears when its credential could not be
// checked; the cause goes to the log, not to the client.
var errUnavailable = errors.New("authentication is temporarily unavailable; try again shortly")

// MetadataPath is the path at which [Authenticator.MetadataHandler] must be
// mounted on the resource URL's host: the well-known prefix followed by the
// resource URL's path (RFC 9728 §3.1), e.g.
// /.well-known/oauth-protected-resource/mcp for https://gw.example.com/mcp.
func (a *Authenticator) MetadataPath() string {
	p := a.resource.EscapedPath()
	if p == "" || p == "/" {
		return wellKnownPrefix
	}
	return wellKnownPrefix + p
}

// MetadataURL is the absolute URL of the metadata document, as announced in
// WWW-Authenticate.
func (a *Authenticator) MetadataURL() string {
	u := url.URL{Scheme: a.resource.Scheme, Host: a.resource.Host}
	return u.String() + a.MetadataPath()
}

// MetadataHandler serves this resource's RFC 9728 protected resource
// metadata as JSON: the resource URL, the authorization servers (when JWTs
// are enabled) and that tokens go in the Authorization header. Mount it at
// [Authenticator.MetadataPath], outside [Authenticator.Middleware].
func (a *Authenticator) MetadataHandler() http.Handler {
	return auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               a.resource.String(),
		AuthorizationServers:   a.authServers,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "taskgate",
	})
}

// Middleware requires a valid bearer token on every request. A request
// without one, or with a rejected one, gets 401 with
//
//	WWW-Authenticate: Bearer resource_metadata="<MetadataURL>"
//
// (RFC 9728 §5.1). An accepted request reaches next with the TokenInfo in
// its context, where go-sdk's Streamable HTTP handler hands it to MCP
// handlers as req.Extra.TokenInfo (read the tenant with [TenantOfRequest]),
// and with its Authorization header removed, so that the downstream
// credential cannot be passed on.
func (a *Authenticator) Middleware(next http.Handler) http.Handler {
	opts := &auth.RequireBearerTokenOptions{ResourceMetadataURL: a.MetadataURL()}
	if a.jwt != nil {
		opts.ClockSkew = a.jwt.opts.Leeway
	}
	strip := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = r.WithContext(r.Context()) // a shallow copy whose Header we may replace
		r.Header = r.Header.Clone()
		r.Header.Del("Authorization")
		next.ServeHTTP(w, r)
	})
	return auth.RequireBearerToken(a.middlewareVerify, opts)(strip)
}

// middlewareVerify is Verify for the HTTP front door: rejections are logged
// with their reason, and failures to check a credential are logged in full
// but answered with errUnavailable, so that internal details stay inside.
func (a *Authenticator) middlewareVerify(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
	ti, err := a.Verify(ctx, token, r)
	switch {
	case err == nil:
		a.log.DebugContext(ctx, "bearer token accepted", "tenant", TenantOf(ti), "method", ti.Extra[ExtraMethod], "key_id", ti.Extra[ExtraKeyID])
		return ti, nil
	case errors.Is(err, auth.ErrInvalidToken):
		a.log.InfoContext(ctx, "bearer token rejected", "remote_addr", r.RemoteAddr, "reason", err.Error())
		return nil, err
	default:
		a.log.ErrorContext(ctx, "bearer token could not be checked", "remote_addr", r.RemoteAddr, "err", err)
		return nil, errUnavailable
	}
}
