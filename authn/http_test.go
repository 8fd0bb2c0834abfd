package authn

import (
	"context"
	"crypto/elliptic"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/taskgate/taskgate/internal/syncbuf"
)

func TestMetadataPath(t *testing.T) {
	tests := []struct {
		resource, wantPath, wantURL string
	}{
		{"https://gw.example.com/mcp", "/.well-known/oauth-protected-resource/mcp", "https://gw.example.com/.well-known/oauth-protected-resource/mcp"},
		{"https://gw.example.com", "/.well-known/oauth-protected-resource", "https://gw.example.com/.well-known/oauth-protected-resource"},
		{"https://gw.example.com/", "/.well-known/oauth-protected-resource", "https://gw.example.com/.well-known/oauth-protected-resource"},
		{"https://gw.example.com:8443/t/a/mcp", "/.well-known/oauth-protected-resource/t/a/mcp", "https://gw.example.com:8443/.well-known/oauth-protected-resource/t/a/mcp"},
		{"http://127.0.0.1:8080/mcp/", "/.well-known/oauth-protected-resource/mcp/", "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp/"},
	}
	store, _ := newLedger(t)
	for _, tt := range tests {
		a, err := New(&Options{Store: store, ResourceURL: tt.resource})
		if err != nil {
			t.Fatalf("New(%s): %v", tt.resource, err)
		}
		if got := a.MetadataPath(); got != tt.wantPath {
			t.Errorf("MetadataPath() for %s = %q, want %q", tt.resource, got, tt.wantPath)
		}
		if got := a.MetadataURL(); got != tt.wantURL {
			t.Errorf("MetadataURL() for %s = %q, want %q", tt.resource, got, tt.wantURL)
		}
	}
}

// gateway is an HTTP server with the metadata document and an MCP-ish
// endpoint behind the middleware, at a real loopback address.
type gateway struct {
	a   *Authenticator
	srv *httptest.Server
}

func newGateway(t *testing.T, opts Options, mcpHandler http.Handler) *gateway {
	t.Helper()
	g := &gateway{}
	mux := http.NewServeMux()
	g.srv = httptest.NewServer(mux)
	t.Cleanup(g.srv.Close)
	opts.ResourceURL = g.srv.URL + "/mcp"
	a, err := New(&opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	g.a = a
	mux.Handle(a.MetadataPath(), a.MetadataHandler())
	mux.Handle("/mcp", a.Middleware(mcpHandler))
	return g
}

func TestMetadataHandler(t *testing.T) {
	is := newIssuer(t)
	g := newGateway(t, Options{JWT: &JWTOptions{
		Issuer:               "https://auth.example.com",
		Audience:             testAudience,
		JWKSURL:              is.jwksURL(),
		AuthorizationServers: []string{"https://login.example.com", "https://auth.example.com"},
	}}, http.NotFoundHandler())

	resp, err := http.Get(g.a.MetadataURL())
	if err != nil {
		t.Fatalf("GET metadata: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET metadata = %s, Content-Type %q; want 200 application/json", resp.Status, resp.Header.Get("Content-Type"))
	}
	var got map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatalf("decode metadata: %v", err)
	}
	want := map[string]any{
		"resource":                 g.srv.URL + "/mcp",
		"authorization_servers":    []any{"https://login.example.com", "https://auth.example.com"},
		"bearer_methods_supported": []any{"header"},
		"resource_name":            "taskgate",
	}
	for k, w := range want {
		if gb, wb := mustJSON(t, got[k]), mustJSON(t, w); string(gb) != string(wb) {
			t.Errorf("metadata %s = %s, want %s", k, gb, wb)
		}
	}

	// go-sdk's own client discovery accepts the document for this resource.
	prm, err := oauthex.GetProtectedResourceMetadata(t.Context(), g.a.MetadataURL(), g.srv.URL+"/mcp", http.DefaultClient)
	if err != nil {
		t.Fatalf("oauthex.GetProtectedResourceMetadata: %v", err)
	}
	if !slices.Equal(prm.AuthorizationServers, []string{"https://login.example.com", "https://auth.example.com"}) {
		t.Errorf("discovered authorization servers = %v", prm.AuthorizationServers)
	}
}

func TestMetadataHandlerAPIKeysOnly(t *testing.T) {
	store, _ := newLedger(t)
	g := newGateway(t, Options{Store: store}, http.NotFoundHandler())
	resp, err := http.Get(g.a.MetadataURL())
	if err != nil {
		t.Fatalf("GET metadata: %v", err)
	}
	defer resp.Body.Close()
	var got map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatalf("decode metadata: %v", err)
	}
	if _, ok := got["authorization_servers"]; ok {
		t.Errorf("metadata without JWTs advertises authorization_servers: %v", got["authorization_servers"])
	}
	if got["resource"] != g.srv.URL+"/mcp" {
		t.Errorf("metadata resource = %v, want %s", got["resource"], g.srv.URL+"/mcp")
	}
}

func TestMiddleware(t *testing.T) {
	store, _ := newLedger(t)
	ec1 := ecKey(t, elliptic.P256())
	is := newIssuer(t, ecJWK(t, "ec-1", &ec1.PublicKey))

	type seen struct {
		ti            *auth.TokenInfo
		authorization string
	}
	seenCh := make(chan seen, 1)
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seenCh <- seen{auth.TokenInfoFromContext(r.Context()), r.Header.Get("Authorization")}
		io.WriteString(w, "ok")
	})
	var logs syncbuf.Buffer
	g := newGateway(t, Options{
		Store:  store,
		JWT:    &JWTOptions{Issuer: testIssuer, Audience: testAudience, JWKSURL: is.jwksURL(), TenantClaim: "org"},
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}, next)
	wantChallenge := `Bearer resource_metadata="` + g.srv.URL + `/.well-known/oauth-protected-resource/mcp"`

	key, _, err := NewAPIKey(t.Context(), store, "acme", "")
	if err != nil {
		t.Fatalf("NewAPIKey: %v", err)
	}
	now := time.Now()
	goodJWT := sign(t, jwt.SigningMethodES256, ec1, "ec-1", claims(now, "globex", nil))
	expiredJWT := sign(t, jwt.SigningMethodES256, ec1, "ec-1", claims(now.Add(-time.Hour), "globex", nil))

	tests := []struct {
		name          string
		authorization string // "" sends no header
		wantStatus    int
		wantTenant    string
		wantMethod    string
	}{
		{"no header", "", http.StatusUnauthorized, "", ""},
		{"not bearer", "Basic YWNtZTpzZWNyZXQ=", http.StatusUnauthorized, "", ""},
		{"bad api key", "Bearer tgk_" + strings.Repeat("A", 52), http.StatusUnauthorized, "", ""},
		{"expired jwt", "Bearer " + expiredJWT, http.StatusUnauthorized, "", ""},
		{"garbage", "Bearer abc", http.StatusUnauthorized, "", ""},
		{"api key", "Bearer " + key, http.StatusOK, "acme", MethodAPIKey},
		{"jwt", "Bearer " + goodJWT, http.StatusOK, "globex", MethodJWT},
		{"lowercase scheme", "bearer " + key, http.StatusOK, "acme", MethodAPIKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, g.srv.URL+"/mcp", strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			if tt.authorization != "" {
				req.Header.Set("Authorization", tt.authorization)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("POST /mcp: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("POST /mcp = %s (%s), want %d", resp.Status, body, tt.wantStatus)
			}
			if tt.wantStatus == http.StatusUnauthorized {
				if got := resp.Header.Get("WWW-Authenticate"); got != wantChallenge {
					t.Errorf("WWW-Authenticate = %q, want %q", got, wantChallenge)
				}
				if tok, ok := strings.CutPrefix(tt.authorization, "Bearer "); ok && len(tok) > 8 && strings.Contains(string(body), tok) {
					t.Errorf("401 body %q echoes the token", body)
				}
				select {
				case s := <-seenCh:
					t.Errorf("next handler ran for a rejected request (tenant %q)", TenantOf(s.ti))
				default:
				}
				return
			}
			s := <-seenCh
			if got := TenantOf(s.ti); got != tt.wantTenant {
				t.Errorf("next handler saw tenant %q, want %q", got, tt.wantTenant)
			}
			if got := s.ti.Extra[ExtraMethod]; got != tt.wantMethod {
				t.Errorf("next handler saw method %v, want %q", got, tt.wantMethod)
			}
			if s.authorization != "" {
				t.Errorf("next handler saw Authorization %q; the downstream credential must be removed", s.authorization)
			}
		})
	}

	// The log tells accepted and rejected requests apart, and never holds a
	// credential.
	logged := logs.String()
	for _, want := range []string{"bearer token accepted", "bearer token rejected", "fetched the issuer's JWKS"} {
		if !strings.Contains(logged, want) {
			t.Errorf("log lacks %q:\n%s", want, logged)
		}
	}
	for _, secret := range []string{key, key[len(APIKeyPrefix):], goodJWT, goodJWT[strings.LastIndexByte(goodJWT, '.')+1:], expiredJWT[strings.LastIndexByte(expiredJWT, '.')+1:]} {
		if strings.Contains(logged, secret) {
			t.Errorf("log contains a credential:\n%s", logged)
		}
	}
}

func TestMiddlewareHidesInternalFailures(t *testing.T) {
	ec1 := ecKey(t, elliptic.P256())
	is := newIssuer(t, ecJWK(t, "ec-1", &ec1.PublicKey))
	is.setStatus(http.StatusBadGateway)
	g := newGateway(t, Options{JWT: &JWTOptions{Issuer: testIssuer, Audience: testAudience, JWKSURL: is.jwksURL()}},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Errorf("next handler ran without verified keys") }))

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, g.srv.URL+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+sign(t, jwt.SigningMethodES256, ec1, "ec-1", claims(time.Now(), "acme", nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /mcp: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("POST /mcp with the JWKS down = %s, want 500 (the token was not judged)", resp.Status)
	}
	if !strings.Contains(string(body), "temporarily unavailable") || strings.Contains(string(body), is.srv.URL) {
		t.Errorf("500 body = %q; want a generic message without internal addresses", body)
	}
}

// bearerTransport adds a bearer token to every request, as an MCP client
// configured with a taskgate credential does.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCPHandlersSeeTheTenant runs a real go-sdk MCP server behind the
// middleware and checks that tool handlers and receiving middleware read
// the tenant of the caller's credential.
func TestMCPHandlersSeeTheTenant(t *testing.T) {
	store, _ := newLedger(t)
	server := mcp.NewServer(&mcp.Implementation{Name: "gateway", Version: "test"}, nil)
	type whoami struct {
		Tenant string `json:"tenant"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "whoami", Description: "name the caller's tenant"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, whoami, error) {
			return nil, whoami{Tenant: TenantOfRequest(req)}, nil
		})
	middlewareSaw := make(chan string, 16)
	server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				middlewareSaw <- TenantOfRequest(req)
			}
			return next(ctx, method, req)
		}
	})
	g := newGateway(t, Options{Store: store}, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))

	connect := func(t *testing.T, token string) (*mcp.ClientSession, error) {
		t.Helper()
		client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "test"}, nil)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		return client.Connect(ctx, &mcp.StreamableClientTransport{
			Endpoint:   g.srv.URL + "/mcp",
			HTTPClient: &http.Client{Transport: bearerTransport{token}},
			MaxRetries: -1,
		}, nil)
	}

	for _, tenant := range []string{"acme", "globex"} {
		t.Run(tenant, func(t *testing.T) {
			key, _, err := NewAPIKey(t.Context(), store, tenant, "")
			if err != nil {
				t.Fatalf("NewAPIKey: %v", err)
			}
			cs, err := connect(t, key)
			if err != nil {
				t.Fatalf("Connect: %v", err)
			}
			defer cs.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
			if err != nil {
				t.Fatalf("CallTool: %v", err)
			}
			var got whoami
			if err := json.Unmarshal(mustJSON(t, res.StructuredContent), &got); err != nil {
				t.Fatalf("decode whoami result %v: %v", res.StructuredContent, err)
			}
			if got.Tenant != tenant {
				t.Errorf("tool handler saw tenant %q, want %q", got.Tenant, tenant)
			}
			if mw := <-middlewareSaw; mw != tenant {
				t.Errorf("receiving middleware saw tenant %q, want %q", mw, tenant)
			}
		})
	}

	t.Run("no credential", func(t *testing.T) {
		cs, err := connect(t, "tgk_"+strings.Repeat("A", 52))
		if err == nil {
			cs.Close()
			t.Fatalf("Connect with an unknown key succeeded; want it refused")
		}
	})
}
