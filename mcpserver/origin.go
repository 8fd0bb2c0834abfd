package mcpserver

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/taskgate/taskgate/internal/loopback"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Browsers send an Origin header with every request a web page makes; the
// MCP transport requires a server to check it, so that a page a user
// happens to visit cannot reach the gateway through a rebound DNS name. A
// client that is not a browser sends none and is not concerned.

// allowedOrigins returns the origins the configuration allows besides the
// request's own host: public_url's (the host clients use may differ from
// the Host a proxy forwards) and allowed_origins, each normalised.
func allowedOrigins(publicURL string, configured []string) map[string]bool {
	allowed := map[string]bool{}
	for _, raw := range append([]string{publicURL}, configured...) {
		if o, _, ok := normalOrigin(raw); ok {
			allowed[o] = true
		}
	}
	return allowed
}

// originAllowed decides whether a request whose Origin header is origin,
// sent with the Host header host, may reach /mcp: when it has no Origin,
// when the origin is the request's own host (any scheme), when it is in
// allowed (normalised by allowedOrigins), or when the request came to a
// loopback listener from a loopback origin — a local tool's page, which the
// Host check already keeps to this machine. Anything else, "null" and
// unreadable values included, is refused.
func originAllowed(origin, host string, localListener bool, allowed map[string]bool) bool {
	if origin == "" {
		return true
	}
	o, hostport, ok := normalOrigin(origin)
	if !ok {
		return false
	}
	scheme, _, _ := strings.Cut(o, "://")
	return allowed[o] || hostport == withoutDefaultPort(scheme, strings.ToLower(host)) || (localListener && loopback.Host(hostport))
}

// normalOrigin reads an origin as a browser writes it, scheme://host[:port],
// and returns it in lower case without a default port, with its host and
// port. A trailing "/" is allowed, as configuration may write one.
func normalOrigin(raw string) (origin, hostport string, ok bool) {
	u, err := url.Parse(raw)
	if err != nil || u.User != nil || u.Opaque != "" || u.Hostname() == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return "", "", false
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", "", false
	}
	hostport = withoutDefaultPort(scheme, strings.ToLower(u.Host))
	return scheme + "://" + hostport, hostport, true
}

// withoutDefaultPort drops the port of hostport when it is scheme's default,
// as browsers do in an Origin header.
func withoutDefaultPort(scheme, hostport string) string {
	if scheme == "http" {
		return strings.TrimSuffix(hostport, ":80")
	}
	return strings.TrimSuffix(hostport, ":443")
}

// checkOrigin refuses, with 403, a request whose Origin originAllowed
// refuses. It comes before authentication: a page must not learn even
// whether its credential would have been accepted.
func checkOrigin(allowed map[string]bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, origin := range r.Header.Values("Origin") {
			if !originAllowed(origin, r.Host, onLoopback(r), allowed) {
				writeOriginRefused(w, origin)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// onLoopback reports whether r reached a loopback address of this host.
func onLoopback(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return ok && local != nil && loopback.Host(local.String())
}

// writeOriginRefused answers a refused origin with a JSON-RPC error that
// says what an operator who owns that origin configures.
func writeOriginRefused(w http.ResponseWriter, origin string) {
	if len(origin) > 100 {
		origin = origin[:100] + "…"
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{
		"code": jsonrpc.CodeInvalidRequest,
		"message": fmt.Sprintf("requests from the web origin %q are refused, against DNS rebinding; "+
			"if that origin is yours, add it to allowed_origins in the gateway's configuration", origin),
		"data": map[string]any{"reason": "origin_not_allowed"},
	}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusForbidden)
	_, _ = w.Write(append(b, '\n'))
}
