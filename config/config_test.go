package config

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestExampleParses(t *testing.T) {
	f, err := os.Open("taskgate.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := Parse(f, "taskgate.example.yaml", func(k string) string {
		if k == "HOSTED_TEST_TOKEN" {
			return "secret-123"
		}
		return ""
	})
	if err != nil {
		t.Fatalf("Parse(example): %v", err)
	}
	u := c.Upstreams[0]
	if got := u.Headers["Authorization"]; got != "Bearer secret-123" {
		t.Errorf("expanded header = %q", got)
	}
	tool := u.Tools["run_suite"]
	if !tool.Consequential || tool.Approval != "required" || tool.RetryPolicy != RetryLookupThenAttach {
		t.Errorf("run_suite policy = %+v", tool)
	}
	if tool.Contract.Cost.Estimate.String() != "18.00" || tool.Contract.Cost.Estimate.Currency != "USD" {
		t.Errorf("estimate = %v", tool.Contract.Cost.Estimate)
	}
	if tool.Contract.Lookup.Statuses["accepted"][0] != "queued" || tool.Contract.Lookup.NotFoundSafeAfter != nil {
		t.Errorf("lookup = %+v", tool.Contract.Lookup)
	}
	if u.ToolPrefix() != "hosted_test" || !u.IsRequired() {
		t.Errorf("prefix %q required %v", u.ToolPrefix(), u.IsRequired())
	}
	if u.Tools["get_job"].Consequential {
		t.Error("get_job should pass through")
	}
}

func TestDefaults(t *testing.T) {
	c, err := Parse(strings.NewReader("upstreams:\n  - name: a\n    url: http://127.0.0.1:1/mcp\n    prefix: \"\"\n"), "t.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:8931" || c.Database != "sqlite:./taskgate.db" || c.Wait != 30*time.Second || c.PublicURL != "http://127.0.0.1:8931" {
		t.Errorf("defaults = %+v", c)
	}
	if c.Upstreams[0].ToolPrefix() != "" {
		t.Errorf("explicit empty prefix became %q", c.Upstreams[0].ToolPrefix())
	}
	if !*c.Auth.APIKeys || c.Auth.StdioTenant != "local" {
		t.Errorf("auth defaults = %+v", c.Auth)
	}
}

func TestInvalid(t *testing.T) {
	const base = "upstreams:\n  - name: up\n    url: http://127.0.0.1:1/mcp\n    tools:\n      t:\n"
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown field", "listen: 127.0.0.1:1\nlisten_addr: x\n", "field listen_addr not found"},
		{"bad listen", "listen: nowhere\n", "t.yaml:1: listen:"},
		{"bad database", "database: mysql://x\n", "database: must start with sqlite: or postgres://"},
		{"no credentials", "auth:\n  api_keys: false\n", "auth: accepts no credentials"},
		{"jwt without issuer", "auth:\n  jwt:\n    audience: a\n    jwks_url: http://x/j\n", "auth.jwt.issuer: is required"},
		{"no url or command", "upstreams:\n  - name: up\n", "upstreams[0]: needs a url"},
		{"both url and command", "upstreams:\n  - name: up\n    url: http://x/mcp\n    command: [x]\n", "has both url and command"},
		{"bad name", "upstreams:\n  - name: Up Stream\n    url: http://x/mcp\n", "upstreams[0].name: \"Up Stream\" must be lowercase"},
		{"duplicate names", "upstreams:\n  - name: a\n    url: http://x/mcp\n  - name: a\n    url: http://y/mcp\n    prefix: b\n", "upstreams[1].name: \"a\" is also the name of upstreams[0]"},
		{"colliding prefixes", "upstreams:\n  - name: a\n    url: http://x/mcp\n    prefix: p\n  - name: b\n    url: http://y/mcp\n    prefix: p\n", "upstreams[1].prefix: \"p\" is also the prefix"},
		{"lookup_then_attach without lookup", base + "        consequential: true\n        retry_policy: lookup_then_attach\n", "upstreams[0].tools.t.retry_policy: lookup_then_attach needs contract.lookup"},
		{"approval without estimate", base + "        consequential: true\n        approval: required\n", "upstreams[0].tools.t.contract.cost: an approval-gated tool needs an estimate"},
		{"two key channels", base + "        consequential: true\n        contract:\n          key: {argument: k, header: K}\n", "contract.key: set one of argument, meta or header"},
		{"lookup without statuses", base + "        consequential: true\n        contract:\n          lookup: {tool: l, status_field: s}\n", "contract.lookup.statuses: is required"},
		{"unknown lookup answer", base + "        consequential: true\n        contract:\n          lookup: {tool: l, status_field: s, statuses: {done: [ok]}}\n", "contract.lookup.statuses.done: is not one of"},
		{"unknown placeholder", base + "        consequential: true\n        contract:\n          lookup: {tool: l, status_field: s, statuses: {running: [r]}, arguments: {k: \"{key}\"}}\n", "unknown placeholder \"{key}\""},
		{"approval on a pass-through tool", base + "        approval: required\n", "approval: applies only to a consequential tool"},
		{"negative estimate", base + "        consequential: true\n        contract:\n          cost: {estimate: \"-1\"}\n", "contract.cost.estimate: cannot be negative"},
		{"bad money", base + "        consequential: true\n        contract:\n          cost: {estimate: \"1e3\"}\n", "invalid amount"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tt.yaml), "t.yaml", nil)
			if err == nil {
				t.Fatalf("Parse succeeded, want an error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v\nwant it to contain %q", err, tt.want)
			}
		})
	}
}

func TestFieldErrorIsInvalid(t *testing.T) {
	_, err := Parse(strings.NewReader("database: x\n"), "t.yaml", nil)
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("errors.Is(%v, ErrInvalid) = false", err)
	}
}
