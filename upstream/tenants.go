package upstream

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/taskgate/taskgate/config"
)

// ErrNoTenantCredential is wrapped by [Upstream.For]'s error for a tenant
// that an upstream with tenant headers has no credential for.
var ErrNoTenantCredential = errors.New("the upstream has no credential for this tenant")

// NoTenantCredentialError is [Upstream.For]'s refusal: nothing was sent.
type NoTenantCredentialError struct {
	Upstream, Tenant string
}

func (e *NoTenantCredentialError) Error() string {
	return fmt.Sprintf("upstream %s sends each tenant's requests with that tenant's own credential and has none for tenant %s, so nothing was sent to it; "+
		"an operator can add tenant %s under the upstream's tenant_headers, or set its unlisted_tenants: shared to send such requests with the gateway's own credential",
		e.Upstream, e.Tenant, e.Tenant)
}

func (e *NoTenantCredentialError) Unwrap() error { return ErrNoTenantCredential }

// newTenants builds, for an upstream with tenant headers, one Upstream per
// listed tenant: its own configuration (the headers with the tenant's over
// them), its own sessions, relay sessions and connections, so that no
// session or connection carries two tenants' requests. They report no
// state changes (the upstream's own session says whether it is connected,
// for listings and metrics) and announce only the resource updates of the
// subscriptions made on their sessions.
func newTenants(cfg *config.Upstream, o *Options) map[string]*Upstream {
	if len(cfg.TenantHeaders) == 0 {
		return nil
	}
	tenants := make(map[string]*Upstream, len(cfg.TenantHeaders))
	for tenant := range cfg.TenantHeaders {
		tcfg, _ := cfg.ForTenant(tenant)
		to := *o
		to.StateChanged = nil
		to.Logger = o.Logger.With("tenant", tenant)
		t := newUpstream(tcfg, &to)
		t.tenant = tenant
		tenants[tenant] = t
	}
	return tenants
}

// For is the upstream as tenant reaches it. Every request made on behalf
// of a tenant goes through it. An upstream without tenant headers is
// itself for every tenant; one with tenant headers gives a listed tenant
// its own Upstream (see newTenants), an unlisted one this upstream when
// unlisted_tenants is shared, and otherwise a *NoTenantCredentialError.
func (u *Upstream) For(tenant string) (*Upstream, error) {
	if len(u.tenants) == 0 {
		return u, nil
	}
	if t, ok := u.tenants[tenant]; ok {
		return t, nil
	}
	if u.latest.Load().UnlistedTenants == config.UnlistedShared {
		return u, nil
	}
	return nil, &NoTenantCredentialError{Upstream: u.cfg.Name, Tenant: tenant}
}

// Tenant is the tenant u is the upstream of (see For), "" when u is the
// upstream itself, as every tenant reaches one without tenant headers.
func (u *Upstream) Tenant() string { return u.tenant }

// family is u and its tenants' upstreams, u first, the tenants by name.
func (u *Upstream) family() []*Upstream {
	out := []*Upstream{u}
	for _, t := range slices.Sorted(maps.Keys(u.tenants)) {
		out = append(out, u.tenants[t])
	}
	return out
}

// setLatest gives u, and each tenant's upstream, a newer configuration
// with the same connection.
func (u *Upstream) setLatest(cfg *config.Upstream) {
	u.latest.Store(cfg)
	for tenant, t := range u.tenants {
		if tcfg, ok := cfg.ForTenant(tenant); ok {
			t.latest.Store(tcfg)
		}
	}
}

// Credential names the credential u's requests carry without showing it:
// "tenant:" (a tenant's own headers) or "shared:" (the upstream's headers,
// which an upstream without tenant headers sends for every tenant)
// followed by a SHA-256 prefix of the header names and values and the
// URL's user info. Two requests with the same Credential reach the
// provider as the same caller.
func (u *Upstream) Credential() string {
	cfg := u.Config()
	h := sha256.New()
	for _, name := range slices.Sorted(maps.Keys(cfg.Headers)) {
		fmt.Fprintf(h, "%s\x00%s\x00", strings.ToLower(name), cfg.Headers[name])
	}
	if pu, err := url.Parse(cfg.URL); err == nil && pu.User != nil {
		fmt.Fprintf(h, "\x00%s", pu.User.String())
	}
	kind := "shared"
	if u.tenant != "" {
		kind = "tenant"
	}
	return kind + ":" + hex.EncodeToString(h.Sum(nil)[:8])
}
