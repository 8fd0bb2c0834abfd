package console_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"

	"github.com/taskgate/taskgate/api"
	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/console"
	"github.com/taskgate/taskgate/ledger/dburl"
	"github.com/taskgate/taskgate/secrets"
)

// issuer is an OAuth issuer on loopback: its JWKS, and tokens it signs.
type issuer struct {
	key  *ecdsa.PrivateKey
	jwks *httptest.Server
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	set, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(set)
	}))
	t.Cleanup(srv.Close)
	return &issuer{key: key, jwks: srv}
}

func (i *issuer) token(t *testing.T, subject, scope string, expires time.Time) string {
	t.Helper()
	claims := jwt.MapClaims{"iss": i.jwks.URL, "aud": "taskgate-test", "sub": subject, "iat": time.Now().Unix(), "exp": expires.Unix()}
	if scope != "" {
		claims["scope"] = scope
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	tok.Header["kid"] = "k1"
	s, err := tok.SignedString(i.key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// jwtConsole serves the console alone, over an authenticator that takes
// only JWTs from iss, on a fresh SQLite ledger.
func jwtConsole(t *testing.T, iss *issuer, secure bool) string {
	t.Helper()
	store, err := dburl.Open(testCtx(t), "sqlite:"+filepath.Join(t.TempDir(), "taskgate.db"), &dburl.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	auth, err := authn.New(&authn.Options{ResourceURL: "http://127.0.0.1/mcp",
		JWT: &authn.JWTOptions{Issuer: iss.jwks.URL, Audience: "taskgate-test", JWKSURL: iss.jwks.URL, Algorithms: []string{"ES256"}}})
	if err != nil {
		t.Fatal(err)
	}
	ring, err := secrets.ParseRing([]byte(secrets.NewKey()), "test")
	if err != nil {
		t.Fatal(err)
	}
	routes := http.NewServeMux()
	api.New(&api.Options{Store: store}).Register(routes)
	c, err := console.New(&console.Options{Auth: auth, API: routes, Store: store, Sealer: ring, Secure: secure})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/console/", c.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// A JWT carrying taskgate:approve signs in as its subject; one without
// the scope, or expired, does not.
func TestSignInWithJWT(t *testing.T) {
	iss := newIssuer(t)
	b := &browser{t: t, base: jwtConsole(t, iss, false)}
	b.init()
	if p := b.signIn(iss.token(t, "bob", "tools", time.Now().Add(time.Hour))); p.status != http.StatusForbidden || !strings.Contains(p.body, "the console is for approvers") {
		t.Fatalf("a JWT without the approve scope = %d\n%s", p.status, p.body)
	}
	if p := b.signIn(iss.token(t, "alice", authn.ScopeApprove, time.Now().Add(-time.Hour))); p.status != http.StatusUnauthorized {
		t.Fatalf("an expired JWT = %d\n%s", p.status, p.body)
	}
	p := b.signIn(iss.token(t, "alice", "openid "+authn.ScopeApprove, time.Now().Add(time.Hour)))
	if p.status != http.StatusOK || p.url != "/console/inbox" || !strings.Contains(p.body, "<code>jwt:alice</code>") || !strings.Contains(p.body, "tenant <b>alice</b>") {
		t.Fatalf("an approver's JWT = %d at %s\n%s", p.status, p.url, p.body)
	}
}

// Behind an https public URL the session cookie is Secure.
func TestSecureCookie(t *testing.T) {
	iss := newIssuer(t)
	b := &browser{t: t, base: jwtConsole(t, iss, true)}
	b.init()
	b.http.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	p := b.signIn(iss.token(t, "alice", authn.ScopeApprove, time.Now().Add(time.Hour)))
	if ck := p.header.Get("Set-Cookie"); p.status != http.StatusSeeOther || !strings.Contains(ck, "; Secure") || !strings.Contains(ck, "HttpOnly") {
		t.Fatalf("sign-in = %d, Set-Cookie %q; want a Secure, HttpOnly cookie", p.status, ck)
	}
}
