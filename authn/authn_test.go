package authn

import (
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestNewValidatesOptions(t *testing.T) {
	store, _ := newLedger(t)
	jwtOpts := func(edit func(*JWTOptions)) *JWTOptions {
		j := &JWTOptions{Issuer: testIssuer, Audience: testAudience, JWKSURL: "https://auth.example.com/jwks.json"}
		if edit != nil {
			edit(j)
		}
		return j
	}
	tests := []struct {
		name    string
		opts    *Options
		wantErr string // "" means New must succeed
	}{
		{"nil options", nil, "options are required"},
		{"nothing enabled", &Options{ResourceURL: testAudience}, "store and jwt are both unset"},
		{"no resource url", &Options{Store: store}, "resource_url is required"},
		{"relative resource url", &Options{Store: store, ResourceURL: "/mcp"}, "resource_url:"},
		{"plain http resource url", &Options{Store: store, ResourceURL: "http://gw.example.com/mcp"}, "resource_url:"},
		{"resource url with query", &Options{Store: store, ResourceURL: "https://gw.example.com/mcp?x=1"}, "resource_url"},
		{"resource url with fragment", &Options{Store: store, ResourceURL: "https://gw.example.com/mcp#a"}, "resource_url"},
		{"api keys only", &Options{Store: store, ResourceURL: testAudience}, ""},
		{"loopback http", &Options{Store: store, ResourceURL: "http://127.0.0.1:8080/mcp"}, ""},
		{"jwt ok", &Options{JWT: jwtOpts(nil), ResourceURL: testAudience}, ""},
		{"jwt no issuer", &Options{JWT: jwtOpts(func(j *JWTOptions) { j.Issuer = "" }), ResourceURL: testAudience}, "jwt.issuer is required"},
		{"jwt no audience", &Options{JWT: jwtOpts(func(j *JWTOptions) { j.Audience = "" }), ResourceURL: testAudience}, "jwt.audience is required"},
		{"jwt no jwks url", &Options{JWT: jwtOpts(func(j *JWTOptions) { j.JWKSURL = "" }), ResourceURL: testAudience}, "jwt.jwks_url is required"},
		{"jwt http jwks url", &Options{JWT: jwtOpts(func(j *JWTOptions) { j.JWKSURL = "http://auth.example.com/jwks" }), ResourceURL: testAudience}, "jwt.jwks_url:"},
		{"jwt alg none", &Options{JWT: jwtOpts(func(j *JWTOptions) { j.Algorithms = []string{"RS256", "none"} }), ResourceURL: testAudience}, "jwt.algorithms"},
		{"jwt alg HS256", &Options{JWT: jwtOpts(func(j *JWTOptions) { j.Algorithms = []string{"HS256"} }), ResourceURL: testAudience}, "jwt.algorithms"},
		{"jwt alg unknown", &Options{JWT: jwtOpts(func(j *JWTOptions) { j.Algorithms = []string{"EdDSA"} }), ResourceURL: testAudience}, "jwt.algorithms"},
		{"jwt negative leeway", &Options{JWT: jwtOpts(func(j *JWTOptions) { j.Leeway = -time.Second }), ResourceURL: testAudience}, "jwt.leeway"},
		{"jwt huge leeway", &Options{JWT: jwtOpts(func(j *JWTOptions) { j.Leeway = time.Hour }), ResourceURL: testAudience}, "jwt.leeway"},
		{"jwt issuer not a url and no authorization servers", &Options{JWT: jwtOpts(func(j *JWTOptions) { j.Issuer = "my-issuer" }), ResourceURL: testAudience}, "jwt.authorization_servers"},
		{"jwt issuer not a url with authorization servers", &Options{JWT: jwtOpts(func(j *JWTOptions) {
			j.Issuer = "my-issuer"
			j.AuthorizationServers = []string{"https://auth.example.com"}
		}), ResourceURL: testAudience}, ""},
		{"jwt bad authorization server", &Options{JWT: jwtOpts(func(j *JWTOptions) { j.AuthorizationServers = []string{"javascript:alert(1)"} }), ResourceURL: testAudience}, "jwt.authorization_servers[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New(tt.opts)
			if tt.wantErr == "" {
				if err != nil || a == nil {
					t.Fatalf("New() = %v, %v; want an Authenticator", a, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("New() succeeded; want an error containing %q", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("New() error = %q; want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestNewAppliesJWTDefaults(t *testing.T) {
	a, err := New(&Options{
		JWT:         &JWTOptions{Issuer: testIssuer, Audience: testAudience, JWKSURL: "https://auth.example.com/jwks.json"},
		ResourceURL: testAudience,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	got := a.jwt.opts
	if got.TenantClaim != "sub" {
		t.Errorf("TenantClaim = %q, want %q", got.TenantClaim, "sub")
	}
	if strings.Join(got.Algorithms, ",") != "RS256,ES256" {
		t.Errorf("Algorithms = %v, want [RS256 ES256]", got.Algorithms)
	}
	if got.Leeway != 30*time.Second {
		t.Errorf("Leeway = %s, want 30s", got.Leeway)
	}
	if strings.Join(got.AuthorizationServers, ",") != testIssuer {
		t.Errorf("AuthorizationServers = %v, want [%s]", got.AuthorizationServers, testIssuer)
	}
}

func TestVerifyRoutesByPrefix(t *testing.T) {
	store, _ := newLedger(t)
	keysOnly, err := New(&Options{Store: store, ResourceURL: testAudience})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	jwtOnly, err := New(&Options{
		JWT:         &JWTOptions{Issuer: testIssuer, Audience: testAudience, JWKSURL: "https://auth.example.com/jwks.json"},
		ResourceURL: testAudience,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	key, _, err := NewAPIKey(t.Context(), store, "acme", "")
	if err != nil {
		t.Fatalf("NewAPIKey: %v", err)
	}
	tests := []struct {
		name    string
		a       *Authenticator
		token   string
		wantErr string
	}{
		{"empty token", keysOnly, "", "empty"},
		{"jwt on a keys-only gateway", keysOnly, "eyJhbGciOiJSUzI1NiJ9.e30.c2ln", "JWTs are not enabled"},
		{"api key on a jwt-only gateway", jwtOnly, key, "API keys are not enabled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.a.Verify(t.Context(), tt.token, nil)
			if !errorsIsInvalid(err) {
				t.Fatalf("Verify() error = %v; want one that unwraps to auth.ErrInvalidToken", err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Verify() error = %q; want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestTenantOf(t *testing.T) {
	tests := []struct {
		name string
		ti   *auth.TokenInfo
		want string
	}{
		{"nil", nil, ""},
		{"no extra", &auth.TokenInfo{UserID: "acme"}, ""},
		{"non-string tenant", &auth.TokenInfo{Extra: map[string]any{ExtraTenant: 7}}, ""},
		{"tenant", &auth.TokenInfo{UserID: "acme", Extra: map[string]any{ExtraTenant: "acme"}}, "acme"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := TenantOf(tt.ti); got != tt.want {
				t.Errorf("TenantOf() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTenantOfRequest(t *testing.T) {
	ti := &auth.TokenInfo{UserID: "acme", Extra: map[string]any{ExtraTenant: "acme"}}
	tests := []struct {
		name string
		req  mcp.Request
		want string
	}{
		{"nil request", nil, ""},
		{"no extra (stdio)", &mcp.CallToolRequest{}, ""},
		{"extra without token", &mcp.CallToolRequest{Extra: &mcp.RequestExtra{}}, ""},
		{"authenticated", &mcp.CallToolRequest{Extra: &mcp.RequestExtra{TokenInfo: ti}}, "acme"},
		{"client request", &mcp.CreateMessageRequest{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := TenantOfRequest(tt.req); got != tt.want {
				t.Errorf("TenantOfRequest() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCheckTenant(t *testing.T) {
	tests := []struct {
		tenant string
		ok     bool
	}{
		{"acme", true},
		{"org_123/team-a", true},
		{"", false},
		{strings.Repeat("a", maxTenantLen), true},
		{strings.Repeat("a", maxTenantLen+1), false},
		{"ac\nme", false},
		{"ac\x00me", false},
		{"\xff", false},
	}
	for _, tt := range tests {
		err := checkTenant(tt.tenant)
		if got := err == nil; got != tt.ok {
			t.Errorf("checkTenant(%q) = %v, want ok=%v", tt.tenant, err, tt.ok)
		}
	}
}
