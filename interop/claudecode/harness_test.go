package claudecode

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/gatewaybin"
	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
)

// EnvClaude names the environment variable that holds the path of the
// Claude Code binary; `make interop` installs it and sets it.
const EnvClaude = "TASKGATE_INTEROP_CLAUDE"

// Tenant is the tenant Claude Code's key belongs to.
const Tenant = "acme"

// binaries are what the scenarios run: Claude Code, and taskgate built
// from this tree. Empty when EnvClaude is unset.
var binaries struct{ claude, taskgate string }

func TestMain(m *testing.M) {
	binaries.claude = os.Getenv(EnvClaude)
	if binaries.claude == "" {
		os.Exit(m.Run())
	}
	binary, remove, err := gatewaybin.Build("../../cmd/taskgate", "taskgate-interop-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binaries.taskgate = binary
	code := m.Run()
	remove()
	os.Exit(code)
}

// needClaude skips the test unless `make interop` provided Claude Code.
func needClaude(t *testing.T) {
	t.Helper()
	if binaries.claude == "" {
		t.Skipf("SKIPPED: %s is not set; `make interop` installs Claude Code and runs these tests", EnvClaude)
	}
}

// stage is a real `taskgate serve` in front of the simulated provider,
// with Claude Code's key.
type stage struct {
	*fixtures.Harness
	key string
}

// newStage starts a gateway process in front of a provider whose jobs take
// job, configured by cfg; edit, when set, rewrites its configuration.
func newStage(t *testing.T, ctx context.Context, job time.Duration, cfg fixtures.ConfigOptions, edit func(string) string) *stage {
	t.Helper()
	h, err := fixtures.New(ctx, &fixtures.Options{
		Process: []string{binaries.taskgate}, Config: cfg, EditConfig: edit,
		Sim: providersim.Options{JobDuration: job},
	})
	if err != nil {
		t.Fatalf("start the gateway and the provider: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("taskgate serve's output:\n%s", h.Output())
		}
		h.Close()
	})
	key, err := h.Key(ctx, Tenant)
	if err != nil {
		t.Fatal(err)
	}
	return &stage{Harness: h, key: key}
}

// taskgate runs the taskgate CLI on the stage's ledger and returns its
// stdout.
func (s *stage) taskgate(t *testing.T, ctx context.Context, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, binaries.taskgate, args...)
	cmd.Env = append(os.Environ(), "TASKGATE_DB="+s.Config.Database)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("taskgate %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// receipt is the operation's receipt, as `taskgate receipt --format json`
// prints it.
func (s *stage) receipt(t *testing.T, ctx context.Context, opID string) *receipt.Receipt {
	t.Helper()
	out := s.taskgate(t, ctx, "receipt", opID, "--config", s.ConfigPath, "--tenant", Tenant, "--format", "json")
	var doc struct {
		Receipt *receipt.Receipt `json:"paid_tool_retry_receipt"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.Receipt == nil {
		t.Fatalf("read the receipt of %s: %v\n%s", opID, err, out)
	}
	return doc.Receipt
}

// operation is the tenant's operation opID as the ledger holds it.
func (s *stage) operation(t *testing.T, ctx context.Context, opID string) *ledger.Operation {
	t.Helper()
	op, err := s.Store.OperationGet(ctx, &ledger.OperationGetParams{Tenant: Tenant, OperationID: opID})
	if err != nil {
		t.Fatalf("load operation %s: %v", opID, err)
	}
	return op
}

// events counts op's events in the ledger by kind.
func (s *stage) events(t *testing.T, ctx context.Context, op *ledger.Operation) map[ledger.EventKind]int {
	t.Helper()
	list, err := s.Store.EventList(ctx, op.ID)
	if err != nil {
		t.Fatalf("list the events of operation %s: %v", op.OperationID, err)
	}
	n := map[ledger.EventKind]int{}
	for _, e := range list {
		n[e.Kind]++
	}
	return n
}

// jobsEnded waits until the provider has n jobs, every one ended.
func jobsEnded(t *testing.T, ctx context.Context, sim *providersim.Sim, n int) {
	t.Helper()
	testwait.Until(t, ctx, fmt.Sprintf("the provider to have %d jobs, all ended", n), func() (bool, error) {
		jobs := sim.Jobs()
		if len(jobs) != n {
			return false, fmt.Errorf("%d jobs", len(jobs))
		}
		for _, j := range jobs {
			if !j.Status.Terminal() {
				return false, fmt.Errorf("job %s is %s", j.ID, j.Status)
			}
		}
		return true, nil
	})
}

// client is a Claude Code configuration: a HOME of its own that marks
// onboarding done and the project trusted, a project directory, and the
// MCP servers it is given.
type client struct {
	home, project, mcpConfig string
	env                      []string
}

// newClient prepares Claude Code to talk to the model and to the MCP
// server name at url, sending headers; env is added to its environment.
func newClient(t *testing.T, m *model, name, url string, headers map[string]string, env ...string) *client {
	t.Helper()
	dir := t.TempDir()
	c := &client{home: filepath.Join(dir, "home"), project: filepath.Join(dir, "project"), mcpConfig: filepath.Join(dir, "mcp.json")}
	for _, d := range []string{c.home, c.project} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	state := map[string]any{
		"hasCompletedOnboarding":                  true,
		"lastOnboardingVersion":                   "2.1.328",
		"officialMarketplaceAutoInstallAttempted": true,
		"customApiKeyResponses":                   map[string]any{"approved": []string{"test"}, "rejected": []string{}},
		"projects": map[string]any{c.project: map[string]any{
			"hasTrustDialogAccepted": true, "hasCompletedProjectOnboarding": true, "allowedTools": []string{},
		}},
	}
	writeJSONFile(t, filepath.Join(c.home, ".claude.json"), state)
	writeJSONFile(t, c.mcpConfig, map[string]any{"mcpServers": map[string]any{
		name: map[string]any{"type": "http", "url": url, "headers": headers},
	}})
	c.env = append([]string{
		"HOME=" + c.home,
		"PATH=" + os.Getenv("PATH"),
		"TERM=xterm-256color",
		"LANG=C.UTF-8",
		"ANTHROPIC_BASE_URL=" + m.URL(),
		"ANTHROPIC_API_KEY=test",
		"DISABLE_TELEMETRY=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_ERROR_REPORTING=1",
	}, env...)
	return c
}

// gatewayClient is Claude Code with the stage's gateway as MCP server
// "taskgate".
func gatewayClient(t *testing.T, s *stage, m *model, env ...string) *client {
	return newClient(t, m, "taskgate", s.MCPURL(), map[string]string{"Authorization": "Bearer " + s.key}, env...)
}

// settings writes the project's .claude/settings.json.
func (c *client) settings(t *testing.T, v map[string]any) {
	t.Helper()
	dir := filepath.Join(c.project, ".claude")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeJSONFile(t, filepath.Join(dir, "settings.json"), v)
}

// headless runs `claude -p prompt` to its end and returns what it printed.
func (c *client) headless(t *testing.T, ctx context.Context, prompt string, allowed string) string {
	t.Helper()
	out, err := c.runHeadless(t, ctx, prompt, allowed)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// runHeadless runs `claude -p prompt` to its end, logs what it printed
// and returns its standard output; it may run on any goroutine.
func (c *client) runHeadless(t *testing.T, ctx context.Context, prompt string, allowed string) (string, error) {
	cmd := exec.CommandContext(ctx, binaries.claude, "-p", prompt,
		"--mcp-config", c.mcpConfig, "--strict-mcp-config", "--allowedTools", allowed, "--output-format", "text")
	cmd.Dir = c.project
	cmd.Env = c.env
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("claude -p printed:\n%s%s", stdout.String(), stderr.String())
	if err != nil {
		return "", fmt.Errorf("claude -p: %w", err)
	}
	return stdout.String(), nil
}

func writeJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
