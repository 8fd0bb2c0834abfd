package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

const tenantBase = "upstreams:\n  - name: up\n    url: http://127.0.0.1:1/mcp\n    headers: {Authorization: Bearer shared-secret, X-Client: gw}\n"

func TestTenantHeaders(t *testing.T) {
	y := tenantBase + "    tenant_headers:\n      acme: {authorization: {env: ACME_TOKEN}}\n      globex: {X-Tenant-Key: {env: GLOBEX_KEY}}\n"
	vars := env(map[string]string{"ACME_TOKEN": "Bearer acme-secret", "GLOBEX_KEY": "globex-secret"})
	c, err := Parse(strings.NewReader(y), "t.yaml", vars)
	if err != nil {
		t.Fatal(err)
	}
	u := c.Upstreams[0]
	if u.UnlistedTenants != UnlistedRefuse {
		t.Errorf("unlisted_tenants = %q, want the default refuse", u.UnlistedTenants)
	}
	for _, tt := range []struct {
		tenant string
		want   map[string]string // nil: refused
	}{
		// A tenant's requests carry its own headers only, never the
		// gateway's shared ones.
		{"acme", map[string]string{"authorization": "Bearer acme-secret"}},
		{"globex", map[string]string{"X-Tenant-Key": "globex-secret"}},
		{"initech", nil},
	} {
		got, ok := u.ForTenant(tt.tenant)
		if ok != (tt.want != nil) {
			t.Fatalf("ForTenant(%s) ok = %t, want %t", tt.tenant, ok, tt.want != nil)
		}
		if !ok {
			continue
		}
		if !maps.Equal(got.Headers, tt.want) || len(got.TenantHeaders) != 0 {
			t.Errorf("ForTenant(%s) headers = %v (tenant headers %v), want %v and none", tt.tenant, got.Headers, got.TenantHeaders, tt.want)
		}
	}
	if !maps.Equal(u.Headers, map[string]string{"Authorization": "Bearer shared-secret", "X-Client": "gw"}) {
		t.Errorf("ForTenant changed the upstream's own headers: %v", u.Headers)
	}

	shared, err := Parse(strings.NewReader(y+"    unlisted_tenants: shared\n"), "t.yaml", vars)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := shared.Upstreams[0].ForTenant("initech"); !ok || !maps.Equal(got.Headers, u.Headers) {
		t.Errorf("unlisted_tenants: shared: ForTenant(initech) = %v, %t; want the upstream's headers", got, ok)
	}

	plain, err := Parse(strings.NewReader(tenantBase), "t.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := plain.Upstreams[0].ForTenant("anyone"); !ok || got != plain.Upstreams[0] || got.UnlistedTenants != "" {
		t.Errorf("an upstream without tenant headers: ForTenant = %v, %t; want the upstream itself", got, ok)
	}
}

func TestTenantHeadersInvalid(t *testing.T) {
	vars := env(map[string]string{"ACME_TOKEN": "Bearer acme-secret", "EMPTY": "", "BROKEN": "Bearer x\r\nX-Evil: acme-secret"})
	for _, tt := range []struct {
		name, yaml, want string
	}{
		{"command upstream", "upstreams:\n  - name: up\n    command: [x]\n    tenant_headers:\n      acme: {Authorization: {env: ACME_TOKEN}}\n",
			"t.yaml:4: upstreams[0].tenant_headers: apply only to a url upstream: a command upstream is one process for every tenant"},
		{"value in the file", tenantBase + "    tenant_headers:\n      acme: {Authorization: Bearer acme-secret}\n",
			"t.yaml:6: upstreams[0].tenant_headers.acme.Authorization: must be a mapping of fields (env, sealed), got"},
		{"no source", tenantBase + "    tenant_headers:\n      acme: {Authorization: {}}\n",
			"upstreams[0].tenant_headers.acme.Authorization: needs env (the environment variable that holds the value) or sealed"},
		{"env and sealed", tenantBase + "    tenant_headers:\n      acme: {Authorization: {env: ACME_TOKEN, sealed: tgs1.k.d}}\n",
			"upstreams[0].tenant_headers.acme.Authorization: has both env and sealed; keep one"},
		{"unset variable", tenantBase + "    tenant_headers:\n      acme: {Authorization: {env: NOPE}}\n",
			"t.yaml:6: upstreams[0].tenant_headers.acme.Authorization.env: names NOPE, which is not set in the environment; set it to tenant acme's credential"},
		{"empty variable", tenantBase + "    tenant_headers:\n      acme: {Authorization: {env: EMPTY}}\n",
			"upstreams[0].tenant_headers.acme.Authorization.env: names EMPTY, which is empty"},
		{"line break in the value", tenantBase + "    tenant_headers:\n      acme: {Authorization: {env: BROKEN}}\n",
			"upstreams[0].tenant_headers.acme.Authorization.env: names BROKEN, whose value holds a line break or NUL"},
		{"bad header name", tenantBase + "    tenant_headers:\n      acme: {\"Bad Header\": {env: ACME_TOKEN}}\n",
			`upstreams[0].tenant_headers.acme.Bad Header: "Bad Header" is not an HTTP header name`},
		{"one header twice", tenantBase + "    tenant_headers:\n      acme: {Authorization: {env: ACME_TOKEN}, authorization: {env: ACME_TOKEN}}\n",
			"upstreams[0].tenant_headers.acme: names the header Authorization twice (Authorization, authorization); header names are one whatever their case, so keep one"},
		{"control character in the tenant", tenantBase + "    tenant_headers:\n      \"ac\\tme\": {Authorization: {env: ACME_TOKEN}}\n",
			"upstreams[0].tenant_headers.\"ac\\tme\": names a tenant no credential can carry: tenant contains control characters"},
		{"tenant too long", tenantBase + "    tenant_headers:\n      " + strings.Repeat("a", 257) + ": {Authorization: {env: ACME_TOKEN}}\n",
			"names a tenant no credential can carry: tenant is 257 bytes long; at most 256 are allowed"},
		{"no headers", tenantBase + "    tenant_headers:\n      acme: {}\n",
			"upstreams[0].tenant_headers.acme: lists no headers"},
		{"unknown unlisted_tenants", tenantBase + "    tenant_headers:\n      acme: {Authorization: {env: ACME_TOKEN}}\n    unlisted_tenants: everyone\n",
			`t.yaml:7: upstreams[0].unlisted_tenants: must be refuse or shared, got "everyone"`},
		{"unlisted_tenants alone", tenantBase + "    unlisted_tenants: shared\n",
			"t.yaml:5: upstreams[0].unlisted_tenants: applies only to an upstream with tenant_headers"},
		{"userinfo in the url", "upstreams:\n  - name: up\n    url: http://gw:url-secret@127.0.0.1:1/mcp\n    tenant_headers:\n      acme: {Authorization: {env: ACME_TOKEN}}\n",
			"t.yaml:3: upstreams[0].url: carries a user name or password, which would go with every tenant's requests; move the credential into tenant_headers (or headers)"},
		{"query in the url", "upstreams:\n  - name: up\n    url: http://127.0.0.1:1/mcp?key=url-secret\n    tenant_headers:\n      acme: {Authorization: {env: ACME_TOKEN}}\n",
			"t.yaml:3: upstreams[0].url: carries a query string, which would go with every tenant's requests; move the credential into tenant_headers (or headers)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tt.yaml), "t.yaml", vars)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want %s", err, tt.want)
			}
			// The Authorization value of the one literal case is in the
			// file and may be quoted; no value from the environment is.
			if tt.name != "value in the file" && (strings.Contains(err.Error(), "acme-secret") || strings.Contains(err.Error(), "url-secret")) {
				t.Errorf("the error shows a credential: %v", err)
			}
		})
	}
}

func TestTenantHeadersReload(t *testing.T) {
	y := tenantBase + "    tenant_headers:\n      acme: {Authorization: {env: ACME_TOKEN}}\n"
	parse := func(text string, token string) *Config {
		t.Helper()
		c, err := Parse(strings.NewReader(text), "t.yaml", env(map[string]string{"ACME_TOKEN": token, "GLOBEX_TOKEN": "g-secret"}))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	running := parse(y, "acme-secret-1")
	for _, tt := range []struct {
		name string
		next *Config
		same bool
	}{
		{"unchanged", parse(y, "acme-secret-1"), true},
		{"a new value in the environment", parse(y, "acme-secret-2"), false},
		{"a tenant added", parse(y+"      globex: {Authorization: {env: GLOBEX_TOKEN}}\n", "acme-secret-1"), false},
		{"tenant headers removed", parse(tenantBase, "acme-secret-1"), false},
		// Read per request: no new session is needed.
		{"unlisted tenants shared", parse(y+"    unlisted_tenants: shared\n", "acme-secret-1"), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := SameConnection(running.Upstreams[0], tt.next.Upstreams[0]); got != tt.same {
				t.Errorf("SameConnection = %t, want %t", got, tt.same)
			}
			changes := Changes(running, tt.next)
			named := strings.Contains(strings.Join(changes, "\n"), "tenant_headers")
			if named == tt.same {
				t.Errorf("Changes = %q; want tenant_headers named: %t", changes, !tt.same)
			}
			if tt.name == "unlisted tenants shared" && !slices.Contains(changes, "upstream up unlisted_tenants: shared") {
				t.Errorf("Changes = %q; want unlisted_tenants: shared named", changes)
			}
			for _, c := range changes {
				if strings.Contains(c, "secret") {
					t.Errorf("a change shows a value: %q", c)
				}
			}
		})
	}
}

func TestTenantHeadersSealed(t *testing.T) {
	y := tenantBase + "    tenant_headers:\n      acme: {Authorization: {sealed: tgs1.k1.acme}}\n      globex: {Authorization: {env: GLOBEX}}\n"
	parse := func() *Config {
		t.Helper()
		c, err := Parse(strings.NewReader(y), "t.yaml", env(map[string]string{"GLOBEX": "Bearer globex-secret"}))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// A stand-in for the key ring: it opens what was sealed for its label.
	ring := func(sealed, label string) ([]byte, error) {
		if sealed == "tgs1.k1.acme" && label == TenantHeaderLabel("up", "acme", "authorization") {
			return []byte("Bearer acme-secret"), nil
		}
		return nil, errors.New("sealed value did not open")
	}
	for _, tt := range []struct {
		name string
		open func(string, string) ([]byte, error)
		want string // error; "" opens
	}{
		{"opened", ring, ""},
		{"no key", nil, "upstreams[0].tenant_headers.acme.Authorization.sealed: is sealed, but the gateway has no secrets key to open it"},
		{"another key", func(string, string) ([]byte, error) { return nil, errors.New("key k1 is not in the ring") },
			"upstreams[0].tenant_headers.acme.Authorization.sealed: does not open: key k1 is not in the ring; seal it again"},
		{"an empty value", func(string, string) ([]byte, error) { return []byte{}, nil }, "opens to an empty value"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := parse()
			err := c.OpenTenantHeaders(tt.open)
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("OpenTenantHeaders = %v, want %s", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _ := c.Upstreams[0].ForTenant("acme")
			if got.Headers["Authorization"] != "Bearer acme-secret" {
				t.Errorf("acme's Authorization = %q, want the opened value", got.Headers["Authorization"])
			}
			if h := c.Upstreams[0].TenantHeaders["acme"]["Authorization"]; fmt.Sprint(h) != "sealed" {
				t.Errorf("a sealed header prints as %q, want only that it is sealed", fmt.Sprint(h))
			}
		})
	}
}
