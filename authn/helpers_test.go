package authn

import (
	"context"
	"crypto/ecdsa"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/taskgate/taskgate/ledger/sqlite"
)

// newLedger opens a migrated SQLite ledger in a temporary directory and
// returns it with the path of its file.
func newLedger(t *testing.T) (*sqlite.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.db")
	s, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatalf("sqlite.Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s, path
}

// testClock is a settable clock, so that rate limits and token times can be
// tested without sleeping.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock {
	return &testClock{now: time.Now().Truncate(time.Second)}
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// issuer is an authorization server's JWKS endpoint over real HTTP, whose
// keys can be rotated and whose fetches are counted.
type issuer struct {
	srv     *httptest.Server
	fetches atomic.Int64

	mu     sync.Mutex
	keys   []map[string]any
	status int
}

func newIssuer(t *testing.T, keys ...map[string]any) *issuer {
	t.Helper()
	is := &issuer{keys: keys, status: http.StatusOK}
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		is.fetches.Add(1)
		is.mu.Lock()
		status, body := is.status, map[string]any{"keys": is.keys}
		is.mu.Unlock()
		if status != http.StatusOK {
			http.Error(w, "unavailable", status)
			return
		}
		w.Header().Set("Content-Type", "application/jwk-set+json")
		json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(is.srv.Close)
	return is
}

func (is *issuer) jwksURL() string { return is.srv.URL + "/jwks.json" }

func (is *issuer) setKeys(keys ...map[string]any) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.keys = keys
}

func (is *issuer) setStatus(code int) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.status = code
}

const (
	testIssuer   = "https://auth.example.com"
	testAudience = "https://gw.example.com/mcp"
)

// newJWTAuthenticator returns an Authenticator that trusts is, with the
// tenant in the "org" claim.
func newJWTAuthenticator(t *testing.T, is *issuer, clock *testClock) *Authenticator {
	t.Helper()
	a, err := New(&Options{
		JWT: &JWTOptions{
			Issuer:      testIssuer,
			Audience:    testAudience,
			JWKSURL:     is.jwksURL(),
			TenantClaim: "org",
		},
		ResourceURL: testAudience,
		Clock:       clock.Now,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a
}

func b64url(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func rsaJWK(kid string, pub *rsa.PublicKey) map[string]any {
	return map[string]any{
		"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
		"n": b64url(pub.N.Bytes()),
		"e": b64url(big.NewInt(int64(pub.E)).Bytes()),
	}
}

func ecJWK(t *testing.T, kid string, pub *ecdsa.PublicKey) map[string]any {
	t.Helper()
	b, err := pub.Bytes()
	if err != nil {
		t.Fatalf("ecdsa public key bytes: %v", err)
	}
	size := (len(b) - 1) / 2
	return map[string]any{
		"kty": "EC", "kid": kid, "use": "sig", "crv": pub.Curve.Params().Name,
		"x": b64url(b[1 : 1+size]),
		"y": b64url(b[1+size:]),
	}
}

// claims returns valid claims for tenant at now, changed by edit.
func claims(now time.Time, tenant string, edit func(jwt.MapClaims)) jwt.MapClaims {
	c := jwt.MapClaims{
		"iss":   testIssuer,
		"aud":   testAudience,
		"sub":   "user-" + tenant,
		"org":   tenant,
		"iat":   now.Unix(),
		"nbf":   now.Unix(),
		"exp":   now.Add(5 * time.Minute).Unix(),
		"scope": "tools:call tasks:read",
	}
	if edit != nil {
		edit(c)
	}
	return c
}

// sign mints a JWT with method and key, naming kid unless it is "".
func sign(t *testing.T, method jwt.SigningMethod, key any, kid string, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatalf("sign %s token: %v", method.Alg(), err)
	}
	return s
}

// verifyCtx is a context for one verification, bounded so a hung fetch
// fails the test instead of stalling it.
func verifyCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return b
}
