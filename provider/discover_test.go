package provider_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/provider"
)

// discoverConfig has upstream hosted_test take its contracts from the
// provider, for run_suite with the policy written (indented) in policy.
func discoverConfig(t *testing.T, policy string) *config.Config {
	t.Helper()
	y := "upstreams:\n  - name: hosted_test\n    url: http://127.0.0.1:1/mcp\n    contracts: discover\n    tools:\n      run_suite:\n        consequential: true\n" + policy
	cfg, err := config.Parse(strings.NewReader(y), "t.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// listed is run_suite as an upstream lists it, declaring d (none when nil).
func listed(d any) []*mcp.Tool {
	tool := &mcp.Tool{Name: "run_suite", InputSchema: map[string]any{"type": "object"}}
	if d != nil {
		tool.Meta = mcp.Meta{provider.ContractMetaKey: d}
	}
	return []*mcp.Tool{tool, {Name: "echo", InputSchema: map[string]any{"type": "object"}}}
}

func estimate(c *provider.Contract) string {
	if e := c.Policy.Contract.Cost.Estimate; e != nil {
		return e.String() + " " + e.Currency
	}
	return "none"
}

// A tool that takes its upstream's contract takes no call until the
// upstream lists it; then it adopts the declaration, with the defaults
// that follow. A different declaration later leaves the adopted one in
// force for the operations that recorded it and refuses new calls until
// the configuration is applied again, which adopts the newest.
func TestDiscoverAdoptsTheFirstDeclarationAndHoldsItAgainstAChange(t *testing.T) {
	cfg := discoverConfig(t, "")
	if !cfg.Upstreams[0].Tools["run_suite"].Declared {
		t.Fatal("run_suite with no contract of its own on a discover upstream is not Declared")
	}
	c := provider.NewCatalog(cfg)
	before := c.Contract("hosted_test", "run_suite")
	if before == nil || !strings.Contains(before.Unavailable, "has not listed the upstream's tools yet") {
		t.Fatalf("before any listing: %+v, want a contract that takes no new calls", before)
	}
	if c.ForOperation("hosted_test", "run_suite", nil) != nil {
		t.Error("ForOperation hands out a contract that was never in force")
	}

	first := declaration(t, nil)
	found := c.Discover("hosted_test", listed(first))
	if len(found) != 1 || found[0].State != provider.DeclarationAdopted || found[0].Tool != "run_suite" {
		t.Fatalf("findings = %+v, want run_suite adopted", found)
	}
	adopted := c.Contract("hosted_test", "run_suite")
	if adopted.Unavailable != "" || estimate(adopted) != "18.00 USD" || adopted.Policy.RetryPolicy != ledger.RetryLookupThenAttach {
		t.Fatalf("adopted: unavailable %q, estimate %s, retry policy %s; want available, 18.00 USD, lookup_then_attach (the default with a lookup)", adopted.Unavailable, estimate(adopted), adopted.Policy.RetryPolicy)
	}
	for _, tool := range []string{"lookup_operation", "get_job", "list_charges", "cancel_job"} {
		if !c.GatewayTool("hosted_test", tool) {
			t.Errorf("%s, which the declared contract calls, is not hidden from clients", tool)
		}
	}
	if c.GatewayTool("hosted_test", "echo") || c.GatewayTool("hosted_test", "run_suite") {
		t.Error("a tool the contract does not call is hidden")
	}
	if found := c.Discover("hosted_test", listed(first)); len(found) != 0 {
		t.Errorf("listing the same declaration again finds %+v", found)
	}
	recorded := adopted.Declaration

	second := declaration(t, map[string]any{"cost.estimate": "20.00"})
	found = c.Discover("hosted_test", listed(second))
	if len(found) != 1 || found[0].State != provider.DeclarationChanged {
		t.Fatalf("findings after a change = %+v, want changed", found)
	}
	held := c.Contract("hosted_test", "run_suite")
	if !strings.Contains(held.Unavailable, "taskgate contract show hosted_test.run_suite") || estimate(held) != "18.00 USD" {
		t.Fatalf("after a change: unavailable %q, estimate %s; want new calls refused with what to do, the adopted contract kept", held.Unavailable, estimate(held))
	}
	if op := c.ForOperation("hosted_test", "run_suite", recorded); op == nil || op.Unavailable != "" || estimate(op) != "18.00 USD" {
		t.Fatalf("an operation accepted under the adopted contract runs under %+v", op)
	}

	// The provider goes back: the adopted contract is in force again.
	if found := c.Discover("hosted_test", listed(first)); len(found) != 1 || found[0].State != provider.DeclarationAdopted || c.Contract("hosted_test", "run_suite").Unavailable != "" {
		t.Fatalf("after going back to the adopted declaration: %+v", found)
	}
	c.Discover("hosted_test", listed(second))

	// An operator applies the configuration again: the newest is adopted,
	// and the operation keeps its own.
	c.Replace(cfg, nil)
	if now := c.Contract("hosted_test", "run_suite"); now.Unavailable != "" || estimate(now) != "20.00 USD" {
		t.Fatalf("after a reload: unavailable %q, estimate %s; want the new declaration adopted", now.Unavailable, estimate(now))
	}
	if op := c.ForOperation("hosted_test", "run_suite", recorded); op == nil || estimate(op) != "18.00 USD" {
		t.Fatalf("after a reload, an operation accepted before runs under %+v", op)
	}
}

// What a provider declares is checked against the tool's policy, and a
// declaration the gateway cannot use leaves the tool refusing new calls
// with the reason, shown inert.
func TestDiscoverRefusesWhatItCannotUse(t *testing.T) {
	tests := []struct {
		name, policy string
		declared     any
		state        provider.Declaration
		reason       string
	}{
		{"none", "", nil, provider.DeclarationMissing, "declares no contract"},
		{"not an object", "", "a contract", provider.DeclarationInvalid, "must be a JSON object"},
		{"another version", "", map[string]any{"version": 2}, provider.DeclarationInvalid, "reads version 1 of the declared contract only"},
		{"a lookup that starts the paid work", "", declaration(t, map[string]any{"lookup.tool": "run_suite"}),
			provider.DeclarationInvalid, "calls run_suite, a consequential tool"},
		{"no estimate for an approval-gated tool", "        approval: required\n", declaration(t, map[string]any{"cost": map[string]any{"currency": "USD"}}),
			provider.DeclarationInvalid, "an approval-gated tool needs an estimate"},
		{"lookup_then_attach without a lookup", "        retry_policy: lookup_then_attach\n", declaration(t, map[string]any{"lookup": remove}),
			provider.DeclarationInvalid, "lookup_then_attach needs contract.lookup"},
		{"a field name that steers a terminal", "", declaration(t, map[string]any{"\x1b]0;owned\x07\u202e": 1}),
			provider.DeclarationInvalid, "unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := provider.NewCatalog(discoverConfig(t, tt.policy))
			found := c.Discover("hosted_test", listed(tt.declared))
			if len(found) != 1 || found[0].State != tt.state {
				t.Fatalf("findings = %+v, want run_suite %s", found, tt.state)
			}
			got := c.Contract("hosted_test", "run_suite")
			if !strings.Contains(got.Unavailable, tt.reason) || got.Unavailable != found[0].Reason {
				t.Fatalf("unavailable = %q (finding %q), want it to say %q", got.Unavailable, found[0].Reason, tt.reason)
			}
			if strings.ContainsAny(got.Unavailable, "\x1b\x07\u202e") {
				t.Errorf("the reason carries the declaration's control characters: %q", got.Unavailable)
			}
			if c.GatewayTool("hosted_test", "run_suite") {
				t.Error("the paid tool itself was hidden as a contract call")
			}
			if c.ForOperation("hosted_test", "run_suite", nil) != nil {
				t.Error("ForOperation hands out a contract that is not in force")
			}
		})
	}
}

// A contract written in the configuration wins over a declared one, and
// an upstream that does not discover ignores declarations.
func TestWrittenContractsIgnoreDeclarations(t *testing.T) {
	written := discoverConfig(t, "        contract: {cost: {estimate: \"5.00\"}}\n")
	configured, err := config.Parse(strings.NewReader("upstreams:\n  - name: hosted_test\n    url: http://127.0.0.1:1/mcp\n    tools:\n      run_suite:\n        consequential: true\n"), "t.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]*config.Config{"written": written, "configured": configured} {
		c := provider.NewCatalog(cfg)
		want := c.Contract("hosted_test", "run_suite")
		if found := c.Discover("hosted_test", listed(declaration(t, nil))); len(found) != 0 {
			t.Errorf("%s: findings %+v", name, found)
		}
		if got := c.Contract("hosted_test", "run_suite"); got != want || got.Unavailable != "" || got.Declaration != nil {
			t.Errorf("%s: the contract changed to %+v", name, got)
		}
	}
	var raw json.RawMessage
	if c := provider.NewCatalog(written); c.ForOperation("hosted_test", "run_suite", raw) == nil {
		t.Error("an operation of a written contract has no contract")
	}
}
