package cli_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/cmd/taskgate/cli"
	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/provider"
	"github.com/taskgate/taskgate/providerkit"
	"github.com/taskgate/taskgate/providerkit/sqlitestore"
)

// kitServer serves a providerkit run_suite over Streamable HTTP and
// returns its URL.
func kitServer(t *testing.T) string {
	t.Helper()
	jobs, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { jobs.Close() })
	kit := providerkit.New(jobs, nil)
	t.Cleanup(kit.Close)
	server := mcp.NewServer(&mcp.Implementation{Name: "hostedsuite", Version: "1.0.0"}, nil)
	kit.AddTool(server, &mcp.Tool{Name: "run_suite", InputSchema: map[string]any{"type": "object"}},
		providerkit.Paid{Work: func(context.Context, *providerkit.Run) (any, error) { return "ok", nil }, Estimate: new(money.MustParse("18.00", "USD"))})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(srv.Close)
	return srv.URL
}

func runConfig(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := cli.Main(ctx, args, &stdout, &stderr, func(string) string { return "" })
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

const discoverTool = "      run_suite:\n        consequential: true\n"

// contract show prints the contract an upstream declares as a contract:
// block that, pasted under the tool, pins the same contract; and a
// written contract as it is written.
func TestContractShow(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "taskgate.yaml")
	y := "database: sqlite:" + filepath.Join(dir, "taskgate.db") + "\nupstreams:\n  - name: hosted_test\n    url: " + kitServer(t) + "/mcp\n    contracts: discover\n    tools:\n" + discoverTool
	if err := os.WriteFile(file, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runConfig(t, "contract", "show", "hosted_test.run_suite", "--config", file)
	if r.code != 0 {
		t.Fatalf("contract show: exit %d, stderr %s", r.code, r.stderr)
	}
	if !strings.HasPrefix(r.stdout, "# hosted_test.run_suite: the provider contract upstream hosted_test declares") || !strings.Contains(r.stdout, "\ncontract:\n") || !strings.Contains(r.stdout, "\n  key:\n    meta: dev.taskgate/provider-key\n") {
		t.Fatalf("contract show printed:\n%s", r.stdout)
	}

	// What the gateway adopts from the declaration...
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	c := provider.NewCatalog(cfg)
	tools := kitTools(t, cfg.Upstreams[0].URL)
	c.Discover("hosted_test", tools)
	adopted := c.Contract("hosted_test", "run_suite")
	if adopted.Unavailable != "" {
		t.Fatal(adopted.Unavailable)
	}
	// ...is what the pasted block pins.
	indented := strings.ReplaceAll(strings.TrimSuffix(r.stdout, "\n"), "\n", "\n        ")
	pinned := strings.Replace(y, discoverTool, discoverTool+"        "+indented+"\n", 1)
	if err := os.WriteFile(file, []byte(pinned), 0o600); err != nil {
		t.Fatal(err)
	}
	pcfg, err := config.Load(file)
	if err != nil {
		t.Fatalf("the pasted block does not load: %v\n%s", err, pinned)
	}
	written := pcfg.Upstreams[0].Tools["run_suite"]
	if written.Declared || !reflect.DeepEqual(written.Contract, adopted.Policy.Contract) || written.RetryPolicy != adopted.Policy.RetryPolicy {
		t.Fatalf("the pinned contract\n%+v\nis not the adopted one\n%+v", written.Contract, adopted.Policy.Contract)
	}

	r = runConfig(t, "contract", "show", "hosted_test.run_suite", "--config", file)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "# hosted_test.run_suite: the provider contract written in "+file+" at upstreams[0].tools.run_suite.contract\ncontract:\n  cancel:\n") {
		t.Fatalf("contract show of a written contract: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	checkFailure(t, runConfig(t, "contract", "show", "hosted_test.echo", "--config", file), "hosted_test.echo is not a consequential tool", false)
	checkFailure(t, runConfig(t, "contract", "show", "nowhere.run_suite", "--config", file), `"nowhere.run_suite" names no upstream`, true)
}

func kitTools(t *testing.T, url string) []*mcp.Tool {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return res.Tools
}
