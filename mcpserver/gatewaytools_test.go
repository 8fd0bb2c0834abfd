package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/daemon"
	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/mcpserver"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
	"github.com/taskgate/taskgate/taskwire"
)

// contractTools are the tools the harness configuration's contracts call:
// run_suite's lookup, fetch, charges and cancel, and run_matrix's
// estimate_tool. estimate_suite is called by none and passes through.
var contractTools = []string{"hosted_test.lookup_operation", "hosted_test.get_job", "hosted_test.list_charges", "hosted_test.cancel_job", "hosted_test.estimate_matrix"}

// TestContractToolsBelongToTheGateway: another tenant neither sees the
// tools the provider contracts call nor can call them, on the SDK path or
// relayed, in a 2025-11-25 session or a 2026-07-28 request: its
// cancel_job of acme's running job is refused and the job runs on.
func TestContractToolsBelongToTheGateway(t *testing.T) {
	for _, path := range []struct {
		name        string
		sdkPathOnly bool
	}{{"relayed", false}, {"SDK path", true}} {
		t.Run(path.name, func(t *testing.T) {
			sim := providersim.New(&providersim.Options{JobDuration: time.Minute})
			t.Cleanup(func() { sim.Close() })
			simSrv := httptest.NewServer(sim.HTTPHandler())
			t.Cleanup(simSrv.Close)
			url, keys := gatewayOfSim(t, simSrv.URL+"/mcp", path.sdkPathOnly, "", "acme", "evil")

			ctx := testCtx(t)
			acme, err := fixtures.Dial(ctx, url, keys[0], fixtures.EraExtension, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { acme.Close() })
			if task, _, err := taskwire.CallToolAsTask(ctx, acme, fixtures.RunSuiteCall("acme-suite-1", nil), nil); err != nil || task == nil {
				t.Fatalf("acme's run_suite = %v, %v; want a task", task, err)
			}
			var job string
			testwait.Until(t, ctx, "acme's job running at the provider", func() (bool, error) {
				jobs := sim.Jobs()
				if len(jobs) == 1 && jobs[0].Status == providersim.StatusRunning {
					job = jobs[0].ID
					return true, nil
				}
				return false, errors.New("no running job yet")
			})

			for _, era := range []fixtures.Era{fixtures.EraLegacy, fixtures.EraPlain, fixtures.EraExtension} {
				evil, err := fixtures.Dial(ctx, url, keys[1], era, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer evil.Close()
				names := listedTools(t, ctx, evil)
				for _, name := range contractTools {
					if names[name] {
						t.Errorf("%s: tools/list names %s, which a provider contract calls", era, name)
					}
				}
				if !names["hosted_test.estimate_suite"] || !names["hosted_test.run_suite"] {
					t.Errorf("%s: tools/list = %v; want estimate_suite and run_suite still listed", era, names)
				}
				for _, name := range contractTools {
					args := map[string]any{"job_id": job}
					switch name {
					case "hosted_test.lookup_operation":
						args = map[string]any{"idempotency_key": "acme-suite-1"}
					case "hosted_test.estimate_matrix":
						args = map[string]any{"suite": "x", "runners": 2}
					}
					_, err := evil.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
					checkReserved(t, string(era), name, err)
					if era != fixtures.EraPlain {
						_, _, err = taskwire.CallToolAsTask(ctx, evil, &mcp.CallToolParams{Name: name, Arguments: args}, nil)
						checkReserved(t, string(era)+" as a task", name, err)
					}
				}
			}
			if jobs := sim.Jobs(); len(jobs) != 1 || jobs[0].Status != providersim.StatusRunning {
				t.Errorf("provider jobs = %+v; want acme's one job still running", jobs)
			}
		})
	}
}

// TestExposedContractToolIsListed: expose: true lists a contract's tool
// again and passes its calls through.
func TestExposedContractToolIsListed(t *testing.T) {
	sim := providersim.New(&providersim.Options{})
	t.Cleanup(func() { sim.Close() })
	simSrv := httptest.NewServer(sim.HTTPHandler())
	t.Cleanup(simSrv.Close)
	hidden, hiddenKeys := gatewayOfSim(t, simSrv.URL+"/mcp", false, "      estimate_matrix: {}\n", "acme")
	exposed, exposedKeys := gatewayOfSim(t, simSrv.URL+"/mcp", false, "      estimate_matrix: {expose: true}\n", "acme")
	for _, tt := range []struct {
		url, key string
		listed   bool
	}{{hidden, hiddenKeys[0], false}, {exposed, exposedKeys[0], true}} {
		ctx := testCtx(t)
		cs := dialGateway(t, tt.url, tt.key, "exposing-client", "", nil)
		if got := listedTools(t, ctx, cs)["hosted_test.estimate_matrix"]; got != tt.listed {
			t.Errorf("estimate_matrix listed = %v; want %v", got, tt.listed)
		}
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "hosted_test.estimate_matrix", Arguments: map[string]any{"suite": "x", "runners": 2}})
		if tt.listed && err != nil {
			t.Errorf("exposed estimate_matrix = %v; want it passed through", err)
		}
		if !tt.listed {
			checkReserved(t, "not exposed", "hosted_test.estimate_matrix", err)
		}
	}
}

// checkReserved fails the test unless err refuses a call of a tool that
// belongs to the gateway, saying so to the model.
func checkReserved(t *testing.T, what, name string, err error) {
	t.Helper()
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) {
		t.Errorf("%s: %s answered %v; want it refused", what, name, err)
		return
	}
	var data struct{ Reason, Tool string }
	_ = json.Unmarshal(werr.Data, &data)
	if werr.Code != jsonrpc.CodeInvalidParams || data.Reason != mcpserver.ReasonToolReservedForGateway || data.Tool != name ||
		!strings.Contains(werr.Message, name) || !strings.Contains(werr.Message, "expose") {
		t.Errorf("%s: %s refused with %d %q %s; want -32602 naming the tool and expose, reason %s", what, name, werr.Code, werr.Message, werr.Data, mcpserver.ReasonToolReservedForGateway)
	}
}

// listedTools returns the names of every tool cs is listed.
func listedTools(t *testing.T, ctx context.Context, cs *mcp.ClientSession) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names[tool.Name] = true
	}
	return names
}

// gatewayOfSim starts a gateway configured as the harness configures
// hosted_test, in front of the simulated provider at simURL, with tools
// added to hosted_test's tools, and returns its MCP endpoint and an API
// key for each tenant.
func gatewayOfSim(t *testing.T, simURL string, sdkPathOnly bool, tools string, tenants ...string) (url string, keys []string) {
	t.Helper()
	ctx := testCtx(t)
	db := "sqlite:" + filepath.Join(t.TempDir(), "taskgate.db")
	y := fixtures.ConfigYAML(simURL, "127.0.0.1:0", db, fixtures.ConfigOptions{})
	y = strings.Replace(y, "      estimate_matrix: {}\n", tools, 1)
	cfg, err := config.Parse(strings.NewReader(y), "tenancy.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := daemon.Start(ctx, &daemon.Options{Config: cfg, SDKPathOnly: sdkPathOnly})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(context.Background()) })
	for _, tenant := range tenants {
		key, _, err := authn.NewAPIKey(ctx, d.Store, tenant, "test")
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key)
	}
	return d.URL + "/mcp", keys
}
