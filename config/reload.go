package config

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// A running gateway applies a new configuration (reload) without a
// restart, except for the fields that shape what was built at start: the
// listener and what it answers, the ledger, the worker and the secrets key.
// CheckReload refuses a file that changes one of those; Changes says what
// a reload changes, for the log and for the operator who asked.

// restartOnly are the fields that change only with a restart, and how each
// is read from a Config.
func restartOnly() []struct {
	field string
	get   func(*Config) any
} {
	return []struct {
		field string
		get   func(*Config) any
	}{
		{"listen", func(c *Config) any { return c.Listen }},
		{"database", func(c *Config) any { return c.Database }},
		{"public_url", func(c *Config) any { return c.PublicURL }},
		{"max_body_bytes", func(c *Config) any { return c.MaxBodyBytes }},
		{"allowed_origins", func(c *Config) any { return c.AllowedOrigins }},
		{"retention", func(c *Config) any { return c.Retention }},
		{"worker", func(c *Config) any { return c.Worker }},
		{"secrets", func(c *Config) any { return c.Secrets }},
		{"limits", func(c *Config) any { return c.Limits }},
		{"auth.stdio_tenant", func(c *Config) any { return c.Auth.StdioTenant }},
		{"control_socket", func(c *Config) any { return c.ControlSocket }},
		{"telemetry", func(c *Config) any { return c.Telemetry }},
	}
}

// CheckReload reports, as FieldErrors naming next's file, every field that
// next changes from running and that a running gateway cannot change.
func CheckReload(running, next *Config) error {
	var errs []error
	for _, f := range restartOnly() {
		if !reflect.DeepEqual(f.get(running), f.get(next)) {
			errs = append(errs, &FieldError{File: next.File, Field: f.field,
				Reason: "changes only when taskgate restarts; restart it to apply this file, or set the field back to reload the rest"})
		}
	}
	return errors.Join(errs...)
}

// SameConnection reports whether two configurations of an upstream connect
// the same way (endpoint, environment, credentials, tenant credentials,
// timeout, tasks setting and restart budget), so that its sessions can stay
// as they are. unlisted_tenants is not among them: it is read per request.
func SameConnection(a, b *Upstream) bool {
	return a.Name == b.Name && a.URL == b.URL && slices.Equal(a.Command, b.Command) &&
		maps.Equal(a.Env, b.Env) && maps.Equal(a.Headers, b.Headers) && a.Timeout == b.Timeout && a.Tasks == b.Tasks &&
		a.MaxRestartsPerMinute == b.MaxRestartsPerMinute && sameTenantHeaders(a, b)
}

// sameTenantHeaders reports whether a and b send every tenant the same
// headers: the same tenants, header names and values (read from the
// environment when each was loaded).
func sameTenantHeaders(a, b *Upstream) bool {
	return maps.EqualFunc(a.tenantHeaderValues(), b.tenantHeaderValues(), maps.Equal)
}

// connectionFields names the connection settings that differ between two
// configurations of an upstream. Header and environment values are not
// named, only that they changed: they hold credentials.
func connectionFields(a, b *Upstream) []string {
	var out []string
	add := func(changed bool, name string) {
		if changed {
			out = append(out, name)
		}
	}
	add(a.URL != b.URL, "url")
	add(!slices.Equal(a.Command, b.Command), "command")
	add(!maps.Equal(a.Env, b.Env), "env")
	add(!maps.Equal(a.Headers, b.Headers), "headers")
	add(!sameTenantHeaders(a, b), "tenant_headers")
	add(a.Timeout != b.Timeout, "timeout")
	add(a.Tasks != b.Tasks, "tasks")
	add(a.MaxRestartsPerMinute != b.MaxRestartsPerMinute, "max_restarts_per_minute")
	return out
}

// Changes lists what next changes from running, one sentence each, in a
// stable order: upstreams added, removed and changed (connection, prefix,
// required, each tool whose policy changed), then the other fields.
func Changes(running, next *Config) []string {
	var out []string
	old := map[string]*Upstream{}
	for _, u := range running.Upstreams {
		old[u.Name] = u
	}
	seen := map[string]bool{}
	for _, u := range next.Upstreams {
		seen[u.Name] = true
		was, ok := old[u.Name]
		if !ok {
			out = append(out, "upstream "+u.Name+" added")
			continue
		}
		if f := connectionFields(was, u); len(f) > 0 {
			out = append(out, fmt.Sprintf("upstream %s reconnects with a new %s", u.Name, strings.Join(f, ", ")))
		}
		if was.ToolPrefix() != u.ToolPrefix() {
			out = append(out, fmt.Sprintf("upstream %s lists its tools and prompts under prefix %q instead of %q", u.Name, u.ToolPrefix(), was.ToolPrefix()))
		}
		if was.IsRequired() != u.IsRequired() {
			out = append(out, fmt.Sprintf("upstream %s required: %t", u.Name, u.IsRequired()))
		}
		if was.UnlistedTenants != u.UnlistedTenants && len(u.TenantHeaders) > 0 {
			out = append(out, fmt.Sprintf("upstream %s unlisted_tenants: %s", u.Name, u.UnlistedTenants))
		}
		tools := slices.Sorted(maps.Keys(was.Tools))
		for _, name := range slices.Sorted(maps.Keys(u.Tools)) {
			if _, ok := was.Tools[name]; !ok {
				tools = append(tools, name)
			}
		}
		for _, name := range tools {
			before, after := was.Tools[name], u.Tools[name]
			switch {
			case before == nil && after != nil:
				out = append(out, fmt.Sprintf("tool %s.%s configured", u.Name, name))
			case before != nil && after == nil:
				out = append(out, fmt.Sprintf("tool %s.%s no longer configured (it passes through)", u.Name, name))
			case !reflect.DeepEqual(before, after):
				out = append(out, fmt.Sprintf("tool %s.%s policy changed (for new operations)", u.Name, name))
			}
		}
	}
	for _, u := range running.Upstreams {
		if !seen[u.Name] {
			out = append(out, "upstream "+u.Name+" removed")
		}
	}
	if !reflect.DeepEqual(running.Auth.APIKeys, next.Auth.APIKeys) || !reflect.DeepEqual(running.Auth.JWT, next.Auth.JWT) {
		out = append(out, "auth changed")
	}
	for _, f := range []struct {
		name      string
		was, next any
	}{
		{"wait", running.Wait, next.Wait},
		{"task_ttl", running.TaskTTL, next.TaskTTL},
		{"approval_request_ttl", running.ApprovalRequestTTL, next.ApprovalRequestTTL},
		{"poll_interval", running.PollInterval, next.PollInterval},
	} {
		if f.was != f.next {
			out = append(out, fmt.Sprintf("%s: %v (was %v)", f.name, f.next, f.was))
		}
	}
	return out
}
