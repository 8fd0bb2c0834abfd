package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/mcpserver"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
	"github.com/taskgate/taskgate/taskwire"
)

// tenancyContractTools are the tools the harness configuration's provider
// contracts call; estimate_suite is called by none.
var tenancyContractTools = []string{"hosted_test.lookup_operation", "hosted_test.get_job", "hosted_test.list_charges", "hosted_test.cancel_job", "hosted_test.estimate_matrix"}

// TestHostileTenantCannotReachAnotherTenantsJobs: against a real gateway
// process in front of the simulated provider, tenant acme starts a
// long-running suite; tenant evil, in either protocol era, is listed none
// of the tools the provider contracts call, is refused each of them, and
// cannot find acme's job with the provider key the old derivation gives
// for acme's operation (tenant, operation ID, row) through any tool it
// can reach. acme's operation runs on, not cancelled. Exposing a contract
// tool by a reload lists it again, telling the open session.
func TestHostileTenantCannotReachAnotherTenantsJobs(t *testing.T) {
	ctx := testCtx(t, 3*time.Minute)
	dir := t.TempDir()
	listen := freeAddr(t)
	db := "sqlite:" + filepath.Join(dir, "ledger.db")
	socket := filepath.Join(dir, "control.sock")

	sim := providersim.New(&providersim.Options{JobDuration: 5 * time.Minute})
	t.Cleanup(func() { sim.Close() })
	simURL := serveHandler(t, sim.HTTPHandler())
	// evil probes every contract tool with every key in quick succession:
	// the per-tenant call rate is lifted so that each probe reaches the
	// rule under test rather than the rate limit.
	cfg := fixtures.ConfigYAML(simURL, listen, db, fixtures.ConfigOptions{}) + "control_socket: " + socket + "\n" +
		"limits: {call_rate: 100000, call_burst: 100000}\n"
	path := filepath.Join(dir, "taskgate.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	acmeKey, evilKey := apiKey(t, ctx, db, "acme"), apiKey(t, ctx, db, "evil")
	g := startGateway(t, path)
	g.waitOutput(t, ctx, "taskgate is serving")
	url := "http://" + listen + "/mcp"

	acme, err := fixtures.Dial(ctx, url, acmeKey, fixtures.EraExtension, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { acme.Close() })
	const opID = "settlement-regression-842"
	task, _, err := taskwire.CallToolAsTask(ctx, acme, fixtures.RunSuiteCall(opID, nil), nil)
	if err != nil || task == nil {
		t.Fatalf("acme's run_suite = %v, %v; want a task", task, err)
	}
	var job providersim.Job
	testwait.Until(t, ctx, "acme's job to run at the provider", func() (bool, error) {
		jobs := sim.Jobs()
		if len(jobs) == 1 && jobs[0].Status == providersim.StatusRunning {
			job = jobs[0]
			return true, nil
		}
		return false, fmt.Errorf("provider jobs %+v", jobs)
	})

	// What evil can compute of acme's key: the operation ID is guessable
	// and the row one of the first few.
	var guesses []string
	for row := int64(1); row <= 5; row++ {
		guesses = append(guesses, (&ledger.Operation{ID: row, Tenant: "acme", OperationID: opID}).ProviderKey())
	}
	for _, k := range guesses {
		if k == job.IdempotencyKey {
			t.Errorf("the provider received key %s for acme's operation, which the old derivation computes", k)
		}
	}

	for _, era := range []fixtures.Era{fixtures.EraLegacy, fixtures.EraExtension} {
		evil, err := fixtures.Dial(ctx, url, evilKey, era, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer evil.Close()
		listed, err := evil.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var reachable []*mcp.Tool
		for _, tool := range listed.Tools {
			for _, name := range tenancyContractTools {
				if tool.Name == name {
					t.Errorf("%s: evil is listed %s", era, name)
				}
			}
			if !tenancyConsequential(tool) {
				reachable = append(reachable, tool)
			}
		}
		// Every tool evil can reach, and every contract tool it tries by
		// name, with acme's job ID and every key it can compute.
		tries := []map[string]any{{"job_id": job.ID}}
		for _, k := range guesses {
			tries = append(tries, map[string]any{"idempotency_key": k}, map[string]any{"idempotency_key": k, "suite": "settlement"})
		}
		for _, name := range append(tenancyToolNames(reachable), tenancyContractTools...) {
			for _, args := range tries {
				res, err := evil.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
				var werr *jsonrpc.Error
				switch {
				case err == nil && tenancyNames(res, job.ID):
					t.Errorf("%s: evil's %s %v answered %s, naming acme's job", era, name, args, fixtures.ResultText(res))
				case errors.As(err, &werr) && strings.Contains(werr.Message+string(werr.Data), job.ID):
					t.Errorf("%s: evil's %s %v was refused naming acme's job: %v", era, name, args, err)
				}
				if !slices.Contains(tenancyContractTools, name) {
					continue
				}
				var data struct{ Reason string }
				if errors.As(err, &werr) {
					_ = json.Unmarshal(werr.Data, &data)
				}
				if data.Reason != mcpserver.ReasonToolReservedForGateway {
					t.Errorf("%s: evil's %s %v = %v, %v; want it refused with reason %s", era, name, args, res, err, mcpserver.ReasonToolReservedForGateway)
				}
			}
		}
	}

	// acme's operation runs on.
	if jobs := sim.Jobs(); len(jobs) != 1 || jobs[0].Status != providersim.StatusRunning {
		t.Errorf("provider jobs after evil's tries = %+v; want acme's one job still running", jobs)
	}
	if got, err := taskwire.GetTask(ctx, acme, task.ID); err != nil || got.Status != taskwire.StatusWorking {
		t.Errorf("acme's task after evil's tries = %+v, %v; want it working", got, err)
	}

	// An operator who exposes estimate_matrix lists it again: the open
	// session is told, and may call it.
	var changed atomic.Int32
	cs := dial(t, ctx, url, evilKey, func() { changed.Add(1) })
	exposed := strings.Replace(cfg, "      estimate_matrix: {}\n", "      estimate_matrix: {expose: true}\n", 1)
	if err := os.WriteFile(path, []byte(exposed), 0o600); err != nil {
		t.Fatal(err)
	}
	reload(t, ctx, path)
	waitTools(t, ctx, cs, "hosted_test.estimate_matrix")
	testwait.Until(t, ctx, "the session to be told the tool list changed", func() (bool, error) {
		return changed.Load() > 0, errors.New("no tools/list_changed yet")
	})
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "hosted_test.estimate_matrix", Arguments: map[string]any{"suite": "settlement", "runners": 2}}); err != nil || res.IsError {
		t.Errorf("exposed estimate_matrix = %+v, %v; want its estimate", res, err)
	}
}

// tenancyConsequential reports whether the gateway lists tool as
// consequential (with its operation_id argument).
func tenancyConsequential(tool *mcp.Tool) bool {
	b, _ := json.Marshal(tool.InputSchema)
	return strings.Contains(string(b), `"`+mcpserver.OperationIDArgument+`"`)
}

func tenancyToolNames(tools []*mcp.Tool) []string {
	var names []string
	for _, t := range tools {
		names = append(names, t.Name)
	}
	return names
}

// tenancyNames reports whether res says anything of job.
func tenancyNames(res *mcp.CallToolResult, job string) bool {
	b, _ := json.Marshal(res)
	return strings.Contains(string(b), job)
}
