package provider_test

import (
	"slices"
	"testing"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/provider"
)

func TestGatewayTools(t *testing.T) {
	call := func(tool string) config.Call { return config.Call{Tool: tool} }
	full := &config.Tool{Consequential: true, Contract: config.Contract{
		Lookup:  &config.Lookup{Call: call("lookup_operation")},
		Fetch:   &config.Fetch{Call: call("get_job")},
		Charges: &config.Charges{Call: call("list_charges")},
		Cancel:  &config.Cancel{Call: call("cancel_job")},
		Cost:    config.Cost{EstimateTool: &config.EstimateTool{Call: call("estimate_suite")}},
	}}
	tests := []struct {
		name  string
		tools map[string]*config.Tool
		want  []string
	}{
		{"no contract", map[string]*config.Tool{"echo": {}}, nil},
		{"a consequential tool without contract calls", map[string]*config.Tool{"run": {Consequential: true}}, nil},
		{"every part of a contract", map[string]*config.Tool{"run_suite": full},
			[]string{"cancel_job", "estimate_suite", "get_job", "list_charges", "lookup_operation"}},
		{"listed without a policy of its own", map[string]*config.Tool{"run_suite": full, "get_job": {}, "echo": {}},
			[]string{"cancel_job", "estimate_suite", "get_job", "list_charges", "lookup_operation"}},
		{"exposed", map[string]*config.Tool{"run_suite": full, "estimate_suite": {Expose: true}},
			[]string{"cancel_job", "get_job", "list_charges", "lookup_operation"}},
		{"two contracts share tools, each named once", map[string]*config.Tool{"run_suite": full, "run_matrix": {Consequential: true, Contract: config.Contract{
			Cancel: &config.Cancel{Call: call("cancel_job")},
			Cost:   config.Cost{EstimateTool: &config.EstimateTool{Call: call("estimate_matrix")}},
		}}}, []string{"cancel_job", "estimate_matrix", "estimate_suite", "get_job", "list_charges", "lookup_operation"}},
		// Only a consequential tool's contract is ever executed.
		{"a pass-through tool's contract calls nothing", map[string]*config.Tool{"echo": {Contract: full.Contract}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := provider.GatewayTools(&config.Upstream{Name: "hosted_test", Tools: tt.tools})
			if !slices.Equal(got, tt.want) {
				t.Errorf("GatewayTools = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCatalogGatewayTool(t *testing.T) {
	cfg := &config.Config{Upstreams: []*config.Upstream{{Name: "hosted_test", Tools: map[string]*config.Tool{
		"run_suite": {Consequential: true, Contract: config.Contract{Cancel: &config.Cancel{Call: config.Call{Tool: "cancel_job"}}}},
	}}}}
	c := provider.NewCatalog(cfg)
	if !c.GatewayTool("hosted_test", "cancel_job") || c.GatewayTool("hosted_test", "run_suite") || c.GatewayTool("other", "cancel_job") {
		t.Fatal("the catalog does not hold hosted_test.cancel_job alone as the gateway's")
	}
	c.Replace(&config.Config{}, []string{"hosted_test"})
	if !c.GatewayTool("hosted_test", "cancel_job") {
		t.Error("a retiring upstream's cancel_job is no longer the gateway's")
	}
	c.Replace(&config.Config{}, nil)
	if c.GatewayTool("hosted_test", "cancel_job") {
		t.Error("a removed upstream's cancel_job is still the gateway's")
	}
}
