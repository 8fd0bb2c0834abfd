package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/cmd/taskgate/cli"
)

func runFixtures(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	// Whatever file the sqlite: URL names, each scenario gets its own.
	db := "sqlite:" + filepath.Join(t.TempDir(), "ignored.db")
	code := cli.Main(ctx, append([]string{"fixtures", "--db", db}, args...), &stdout, &stderr, func(string) string { return "" })
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func TestFixturesJSONRow(t *testing.T) {
	r := runFixtures(t, "--only", "fresh_keys_control", "--format", "json")
	if r.code != 0 {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	var rows []struct {
		Name         string `json:"name"`
		Expected     string `json:"expected"`
		Observed     string `json:"observed"`
		ProviderJobs int    `json:"provider_jobs"`
		Charges      string `json:"charges_usd"`
		Pass         bool   `json:"pass"`
		Detail       string `json:"detail"`
		Seconds      string `json:"duration_seconds"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
		t.Fatalf("stdout is not a JSON array of rows: %v\n%s", err, r.stdout)
	}
	if len(rows) != 1 {
		t.Fatalf("got %d rows, want 1: %s", len(rows), r.stdout)
	}
	row := rows[0]
	want := []struct{ field, got, want string }{
		{"name", row.Name, "fresh_keys_control"},
		{"expected", row.Expected, "two jobs"},
		{"observed", row.Observed, "2 jobs"},
		{"charges_usd", row.Charges, "35.68"},
	}
	for _, w := range want {
		if w.got != w.want {
			t.Errorf("%s = %q, want %q", w.field, w.got, w.want)
		}
	}
	if row.ProviderJobs != 2 || !row.Pass {
		t.Errorf("provider_jobs = %d, pass = %t, want 2 and true (detail %q)", row.ProviderJobs, row.Pass, row.Detail)
	}
	if row.Seconds == "" {
		t.Error("duration_seconds is missing")
	}
	if !strings.Contains(r.stderr, "ok   fresh_keys_control") || !strings.Contains(r.stderr, "1 of 1 scenarios passed") {
		t.Errorf("stderr does not report progress:\n%s", r.stderr)
	}
}

func TestFixturesUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown scenario", []string{"--only", "no_such_scenario"}, "unknown scenario no_such_scenario; the scenarios are: response_lost_after_remote_accept,"},
		{"unknown format", []string{"--format", "yaml"}, `--format "yaml" is not a fixtures format`},
		{"no parallelism", []string{"--parallel", "0"}, "--parallel 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runFixtures(t, tt.args...)
			checkFailure(t, r, tt.want, true)
			if r.stdout != "" {
				t.Errorf("stdout = %q, want nothing", r.stdout)
			}
		})
	}
}

// A scenario that fails is reported in its row and in the exit status,
// without a second error line.
func TestFixturesFailureExitsNonZero(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	// Nothing listens on port 1: the scenario cannot get a ledger.
	code := cli.Main(ctx, []string{"fixtures", "--db", "postgres://postgres@127.0.0.1:1/none", "--only", "fresh_keys_control"}, &stdout, &stderr, func(string) string { return "" })
	if code != 1 {
		t.Fatalf("exit %d, want 1; stdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "fresh_keys_control") || !strings.Contains(stdout.String(), "not carried out") || !strings.Contains(stdout.String(), "NO") {
		t.Errorf("the table does not show the failed scenario:\n%s", stdout.String())
	}
	if strings.Contains(stderr.String(), "Error:") {
		t.Errorf("stderr has an Error: line besides the failed row:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "FAIL fresh_keys_control") || !strings.Contains(stderr.String(), "0 of 1 scenarios passed") {
		t.Errorf("stderr does not report the failure:\n%s", stderr.String())
	}
}
