package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/config"
)

// headerLog keeps the Authorization header and session of every request a
// server receives, and whether it was a tools/call.
type headerLog struct {
	mu   sync.Mutex
	reqs []loggedRequest
}

type loggedRequest struct {
	auth, session string
	call          bool
}

func (l *headerLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg struct {
			Method string `json:"method"`
		}
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			_ = json.Unmarshal(b, &msg)
		}
		l.mu.Lock()
		l.reqs = append(l.reqs, loggedRequest{r.Header.Get("Authorization"), r.Header.Get("Mcp-Session-Id"), msg.Method == "tools/call"})
		l.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

// since returns the Authorization headers of the tools/call requests after
// the first n requests, and fails the test if a session ever carried two
// credentials.
func (l *headerLog) since(t *testing.T, n int) []string {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	bySession := map[string]string{}
	var out []string
	for i, r := range l.reqs {
		if r.session != "" {
			if was, ok := bySession[r.session]; ok && was != r.auth {
				t.Errorf("session %s carried two credentials", r.session)
			}
			bySession[r.session] = r.auth
		}
		if i >= n && r.call {
			out = append(out, r.auth)
		}
	}
	return out
}

func (l *headerLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reqs)
}

// tenantConfig parses an upstream at url with tenant headers for acme and
// globex, their values from env, and extra fields.
func tenantConfig(t *testing.T, url string, env map[string]string, extra string) *config.Upstream {
	t.Helper()
	y := "upstreams:\n  - name: tiny\n    url: " + url + "\n    timeout: 20s\n    headers: {Authorization: Bearer shared}\n" +
		"    tenant_headers:\n      acme: {Authorization: {env: ACME}}\n      globex: {authorization: {env: GLOBEX}}\n" + extra
	c, err := config.Parse(strings.NewReader(y), "t.yaml", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	return c.Upstreams[0]
}

// TestTenantsHaveTheirOwnSessions: against a 2025-11-25 server that holds
// sessions, each listed tenant's calls carry its credential on sessions of
// its own, an unlisted tenant is refused (or, with unlisted_tenants:
// shared, goes on the upstream's own session), and a reload that changes a
// tenant's value reconnects the upstream with the new value.
func TestTenantsHaveTheirOwnSessions(t *testing.T) {
	var log headerLog
	s := newTinyServer(true)
	srv := httptest.NewServer(log.wrap(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)))
	t.Cleanup(srv.Close)
	ctx := testCtx(t)
	env := map[string]string{"ACME": "Bearer acme-1", "GLOBEX": "Bearer globex-1"}
	p, base := startPool(t, tenantConfig(t, srv.URL, env, ""), nil)

	call := func(u *Upstream) []string {
		t.Helper()
		n := log.len()
		if _, err := u.CallTool(ctx, &mcp.CallToolParams{Name: "meta", Arguments: map[string]any{}}, nil); err != nil {
			t.Fatal(err)
		}
		got := log.since(t, n)
		if len(got) != 1 {
			t.Fatalf("the server saw %d tools/call, want 1", len(got))
		}
		return got
	}
	for tenant, want := range map[string]string{"acme": "Bearer acme-1", "globex": "Bearer globex-1"} {
		u, err := base.For(tenant)
		if err != nil || u == base {
			t.Fatalf("For(%s) = %v, %v; want the tenant's own upstream", tenant, u, err)
		}
		for _, got := range call(u) {
			if got != want {
				t.Errorf("%s's call carried %q, want %q", tenant, got, want)
			}
		}
	}
	_, err := base.For("initech")
	var nc *NoTenantCredentialError
	if !errors.As(err, &nc) || !errors.Is(err, ErrNoTenantCredential) || !strings.Contains(err.Error(), "tenant_headers") {
		t.Errorf("For(initech) = %v; want a NoTenantCredentialError saying how to add the tenant", err)
	}

	// unlisted_tenants is read per request: no reconnect.
	applied, err := p.Apply([]*config.Upstream{tenantConfig(t, srv.URL, env, "    unlisted_tenants: shared\n")})
	if err != nil || len(applied.Updated) != 1 {
		t.Fatalf("Apply(unlisted_tenants: shared) = %+v, %v; want the upstream updated in place", applied, err)
	}
	if u, err := base.For("initech"); err != nil || u != base {
		t.Fatalf("For(initech) with unlisted_tenants: shared = %v, %v; want the upstream itself", u, err)
	}
	for _, got := range call(base) {
		if got != "Bearer shared" {
			t.Errorf("an unlisted tenant's call carried %q, want the upstream's own headers", got)
		}
	}

	// A new value for acme, as a reload that reads one gives.
	env["ACME"] = "Bearer acme-2"
	applied, err = p.Apply([]*config.Upstream{tenantConfig(t, srv.URL, env, "")})
	if err != nil || len(applied.Replaced) != 1 {
		t.Fatalf("Apply(new acme value) = %+v, %v; want the upstream replaced", applied, err)
	}
	next, _ := p.Get("tiny")
	acme, err := next.For("acme")
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range call(acme) {
		if got != "Bearer acme-2" {
			t.Errorf("after the reload acme's call carried %q, want the new value", got)
		}
	}
	if _, err := next.For("initech"); err == nil {
		t.Errorf("For(initech) after unlisted_tenants went back to its default: answered; want a refusal")
	}
}

// TestCredential: the fingerprint of a credential says whose it is, tells
// values apart and shows none.
func TestCredential(t *testing.T) {
	env := map[string]string{"ACME": "Bearer acme-1", "GLOBEX": "Bearer globex-1"}
	fingerprints := func(env map[string]string) map[string]string {
		p := NewPool([]*config.Upstream{tenantConfig(t, "http://127.0.0.1:1/mcp", env, "    unlisted_tenants: shared\n")}, &Options{})
		t.Cleanup(func() { p.Close() })
		u, _ := p.Get("tiny")
		out := map[string]string{}
		for _, tenant := range []string{"acme", "globex", "initech"} {
			tu, err := u.For(tenant)
			if err != nil {
				t.Fatal(err)
			}
			out[tenant] = tu.Credential()
		}
		return out
	}
	before := fingerprints(env)
	if !strings.HasPrefix(before["acme"], "tenant:") || !strings.HasPrefix(before["initech"], "shared:") || before["acme"] == before["globex"] {
		t.Errorf("fingerprints = %v; want acme's and globex's own (tenant:, apart) and initech's shared", before)
	}
	for _, fp := range before {
		if strings.Contains(fp, "acme-1") || strings.Contains(fp, "globex-1") || strings.Contains(fp, "shared") && !strings.HasPrefix(fp, "shared:") {
			t.Errorf("fingerprint %q shows a credential", fp)
		}
	}
	after := fingerprints(map[string]string{"ACME": "Bearer acme-2", "GLOBEX": "Bearer globex-1"})
	if after["acme"] == before["acme"] || after["globex"] != before["globex"] || after["initech"] != before["initech"] {
		t.Errorf("after acme's value changed: %v, before %v; want only acme's changed", after, before)
	}
}
