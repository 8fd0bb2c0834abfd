package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/pgtest"
	"github.com/taskgate/taskgate/providerkit"
)

// A hostedsuite process killed mid-job keeps the job in its store: started
// again, it resumes the job, and a retry with the same key gets that job,
// not a second one.
func TestKilledMidJob(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "hostedsuite")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) string
	}{
		{"SQLite", func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "jobs.db") }},
		{"PostgreSQL", func(t *testing.T) string { return pgtest.Schema(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) { killedMidJob(t, bin, tc.store(t)) })
	}
}

func killedMidJob(t *testing.T, bin, store string) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	first := start(t, bin, store)
	call := func(ctx context.Context, s *server, name string, meta mcp.Meta, args map[string]any) (*mcp.CallToolResult, error) {
		return s.client.CallTool(ctx, &mcp.CallToolParams{Name: name, Meta: meta, Arguments: args})
	}
	key := mcp.Meta{providerkit.KeyMeta: "taskgate-7f3a"}
	go call(ctx, first, "run_suite", key, map[string]any{"suite": "settlement", "seconds": 2})
	var job struct {
		Status string `json:"status"`
		JobID  string `json:"job_id"`
	}
	for job.Status != "running" {
		res, err := call(ctx, first, providerkit.LookupTool, nil, map[string]any{"idempotency_key": "taskgate-7f3a"})
		if err != nil {
			t.Fatal(err)
		}
		decode(t, res, &job)
	}
	first.cmd.Process.Signal(syscall.SIGKILL)
	first.cmd.Wait()

	second := start(t, bin, store)
	res, err := call(ctx, second, "run_suite", key, map[string]any{"suite": "settlement", "seconds": 2})
	if err != nil {
		t.Fatal(err)
	}
	var retry struct {
		JobID  string `json:"job_id"`
		Status string `json:"status"`
		Result struct {
			Passed int `json:"passed"`
		} `json:"result"`
	}
	decode(t, res, &retry)
	if retry.JobID != job.JobID || retry.Status != "completed" || retry.Result.Passed != 412 {
		t.Fatalf("the retry after the restart = %+v; want job %s, completed", retry, job.JobID)
	}
	res, err = call(ctx, second, providerkit.ListChargesTool, nil, map[string]any{"job_id": job.JobID})
	if err != nil {
		t.Fatal(err)
	}
	var charges struct {
		Charges []struct {
			Amount, Status string
		} `json:"charges"`
	}
	decode(t, res, &charges)
	if len(charges.Charges) != 1 || charges.Charges[0].Amount != "18.00" || charges.Charges[0].Status != "final" {
		t.Errorf("charges = %+v; want one final 18.00", charges.Charges)
	}
}

type server struct {
	cmd    *exec.Cmd
	url    string
	client *mcp.ClientSession
}

// start runs the binary on store and connects a go-sdk client to it.
func start(t *testing.T, bin, store string) *server {
	t.Helper()
	cmd := exec.Command(bin, "-listen", "127.0.0.1:0", "-store", store)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	_, url, ok := strings.Cut(strings.TrimSpace(line), "serving MCP at ")
	if err != nil || !ok {
		t.Fatalf("hostedsuite printed %q (%v); want the URL it serves", line, err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return &server{cmd: cmd, url: url, client: cs}
}

func decode(t *testing.T, res *mcp.CallToolResult, v any) {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
}

// Every Go block of docs/provider-kit.md's worked example is a part of
// this server as it is.
func TestTheGuideQuotesThisServer(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/provider-kit.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(doc), "```go\n")[1:]
	if len(blocks) < 4 {
		t.Fatalf("docs/provider-kit.md has %d Go blocks, want the worked example's", len(blocks))
	}
	for _, b := range blocks {
		code, _, _ := strings.Cut(b, "```")
		if !strings.Contains(string(src), code) {
			t.Errorf("docs/provider-kit.md quotes code that main.go does not have:\n%s", code)
		}
	}
}
