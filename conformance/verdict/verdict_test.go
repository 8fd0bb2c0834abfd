package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name    string
		run     Run
		direct  Outcome
		gateway Outcome
		sdkPath Outcome
		listed  bool
		want    Verdict
	}{
		{"passes every way", Run20251125, Passed, Passed, Passed, false, Holds},
		{"fails only through taskgate", Run20251125, Passed, Failed, Failed, false, Regression},
		{"missing through taskgate", Run20251125, Passed, NotRun, NotRun, false, Regression},
		{"fails on one path, missing on the other", Run20251125, Passed, Failed, NotRun, false, Regression},
		{"baselined failure", Run20251125, Passed, Failed, Failed, true, Expected},
		{"baselined but passes now", Run20251125, Passed, Passed, Passed, true, Stale},
		{"fails directly", Run20260728, Failed, Failed, Failed, false, NotJudged},
		{"fails directly, passes through taskgate", Run20260728, Failed, Passed, Passed, false, NotJudged},
		{"fails directly and baselined", Run20260728, Failed, Failed, Failed, true, Stale},
		{"baselined but never ran", Run20260728, NotRun, NotRun, NotRun, true, Stale},
		{"only through taskgate", Run20260728, NotRun, Passed, Passed, false, Holds},
		{"fails on the SDK path only", Run20251125, Passed, Passed, Failed, false, Diverges},
		{"fails on the fast path only", Run20251125, Passed, Failed, Passed, false, Diverges},
		{"fails on the fast path only, baselined", Run20251125, Passed, Failed, Passed, true, Diverges},
		{"missing on the SDK path", Run20251125, Passed, Passed, NotRun, false, Diverges},
		{"fails directly, passes on the fast path only", Run20260728, Failed, Passed, Failed, false, Diverges},
		{"tasks: passes through taskgate", RunTasks, NotRun, Passed, Passed, false, Holds},
		{"tasks: fails through taskgate", RunTasks, NotRun, Failed, Failed, false, Regression},
		{"tasks: ran on the SDK path only, failed", RunTasks, NotRun, NotRun, Failed, false, Regression},
		{"tasks: fails through taskgate, baselined", RunTasks, NotRun, Failed, Failed, true, Expected},
		{"tasks: baselined but passes now", RunTasks, NotRun, Passed, Passed, true, Stale},
		{"tasks: baselined but never ran", RunTasks, NotRun, NotRun, NotRun, true, Stale},
		{"tasks: passes on the fast path only", RunTasks, NotRun, Passed, Failed, false, Diverges},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decide(tc.run, Row{Direct: tc.direct, Gateway: tc.gateway, SDKPath: tc.sdkPath}, tc.listed); got != tc.want {
				t.Fatalf("decide = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestJudgeAndCount(t *testing.T) {
	direct := map[string]Outcome{"ping": Passed, "prompts-get-simple": Passed, "tasks-lifecycle": Failed, "tools-list": Passed,
		"tools-call-simple-text": Passed, "logging-set-level": Passed}
	gateway := map[string]Outcome{"ping": Passed, "prompts-get-simple": Failed, "tasks-lifecycle": Failed, "tools-call-simple-text": Failed,
		"logging-set-level": Passed}
	sdkPath := map[string]Outcome{"ping": Passed, "prompts-get-simple": Failed, "tasks-lifecycle": Failed, "tools-list": Passed,
		"tools-call-simple-text": Failed, "logging-set-level": Failed}
	base := map[string]string{"prompts-get-simple": "prompts/get is not relayed", "typo-scenario": "never ran"}
	rows := Judge(Run20260728, direct, gateway, sdkPath, base)
	var got []string
	for _, r := range rows {
		got = append(got, r.Scenario+"="+r.Explain())
	}
	want := []string{
		"logging-set-level=DIVERGES: passes through taskgate, fails there on the SDK path only",
		"ping=ok",
		"prompts-get-simple=baselined: prompts/get is not relayed",
		"tasks-lifecycle=not judged: fails directly",
		"tools-call-simple-text=REGRESSION: passes directly, fails through taskgate, not in the baseline",
		"tools-list=DIVERGES: fails through taskgate, passes there on the SDK path only: the fast path differs",
		"typo-scenario=STALE baseline entry: the scenario did not run",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if c := Count(rows); c != (Counts{Scenarios: 6, Direct: 5, Gateway: 2, SDKPath: 2, Baselined: 1}) {
		t.Fatalf("counts %+v", c)
	}
}

func TestParseBaseline(t *testing.T) {
	good := "server:\n  \"2025-11-25\":\n    completion-complete: not relayed\n  2026-07-28:\n    server-stateless: sessions\n  tasks: {}\n"
	b, err := parseBaseline("b.yml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if b[Run20251125]["completion-complete"] != "not relayed" || b[Run20260728]["server-stateless"] != "sessions" || len(b[RunTasks]) != 0 {
		t.Fatalf("baseline %v", b)
	}
	if b, err := parseBaseline("empty.yml", []byte("# nothing fails\n")); err != nil || len(b) != 0 {
		t.Fatalf("an empty baseline: %v, %v", b, err)
	}
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"no reason", "server:\n  tasks:\n    tasks-lifecycle:\n", "server.tasks.tasks-lifecycle: no reason"},
		{"blank reason", "server:\n  tasks:\n    tasks-lifecycle: \" \"\n", "no reason"},
		{"unknown run", "server:\n  2025-06-18:\n    ping: x\n", "server.2025-06-18: unknown run"},
		{"unknown field", "client:\n  - initialize\n", "not a baseline"},
		{"a list, as go-sdk's", "server:\n  - ping\n", "not a baseline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseBaseline("b.yml", []byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// writeResult writes a scenario's result as the suite's -o option does.
func writeResult(t *testing.T, dir, scenario, checks string) {
	t.Helper()
	d := filepath.Join(dir, "server-"+scenario+"-2026-12-01T11-13-45-402Z")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if checks == "" {
		return
	}
	if err := os.WriteFile(filepath.Join(d, "checks.json"), []byte(checks), 0o644); err != nil {
		t.Fatal(err)
	}
}

const (
	passingChecks = `[{"id":"ping","status":"SUCCESS"},{"id":"wire-schema-valid","status":"SUCCESS"},{"id":"note","status":"INFO"},{"id":"w","status":"WARNING"}]`
	failingChecks = `[{"id":"MCP-Completion","status":"FAILURE","errorMessage":"method not found"},{"id":"wire-schema-valid","status":"SUCCESS"}]`
)

func TestReadResults(t *testing.T) {
	dir := t.TempDir()
	writeResult(t, dir, "ping", passingChecks)
	writeResult(t, dir, "completion-complete", failingChecks)
	writeResult(t, dir, "tasks-status-notifications", `[]`)
	writeResult(t, dir, "tasks-lifecycle", "") // skipped: no checks.json
	writeResult(t, dir, "broken", "{not json")
	if err := os.WriteFile(filepath.Join(dir, "stray.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := readResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Outcome{"ping": Passed, "completion-complete": Failed, "tasks-status-notifications": Passed, "tasks-lifecycle": Failed, "broken": Failed}
	if len(got) != len(want) {
		t.Fatalf("results %v, want %v", got, want)
	}
	for s, o := range want {
		if got[s] != o {
			t.Errorf("%s: %v, want %v", s, got[s], o)
		}
	}

	if err := os.MkdirAll(filepath.Join(dir, "server-ping-2026-12-01T12-00-00-000Z"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := readResults(dir); err == nil || !strings.Contains(err.Error(), "two results for scenario ping") {
		t.Fatalf("two results for one scenario: %v", err)
	}
}

// run judges a results tree end to end: exit status, summary and the
// Markdown file.
func TestRun(t *testing.T) {
	results := t.TempDir()
	for _, r := range []Run{Run20251125, Run20260728} {
		writeResult(t, filepath.Join(results, string(r), "direct"), "ping", passingChecks)
		writeResult(t, filepath.Join(results, string(r), "direct"), "completion-complete", passingChecks)
		for _, path := range []string{"gateway", "sdk-path"} {
			writeResult(t, filepath.Join(results, string(r), path), "ping", passingChecks)
			writeResult(t, filepath.Join(results, string(r), path), "completion-complete", failingChecks)
		}
	}
	for _, path := range []string{"gateway", "sdk-path"} {
		writeResult(t, filepath.Join(results, "tasks", path), "tasks-lifecycle", passingChecks)
		writeResult(t, filepath.Join(results, "tasks", path), "tasks-mrtr-input", failingChecks)
	}
	baseline := filepath.Join(t.TempDir(), "baseline.yml")
	write := func(s string) {
		if err := os.WriteFile(baseline, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	md := filepath.Join(t.TempDir(), "conformance.md")
	judge := func() (int, string) {
		t.Helper()
		var out strings.Builder
		code, err := run([]string{"-results", results, "-baseline", baseline, "-markdown", md}, &out)
		if err != nil {
			t.Fatal(err)
		}
		return code, out.String()
	}

	write("server:\n  \"2025-11-25\":\n    completion-complete: not relayed\n  tasks:\n    tasks-mrtr-input: not relayed\n")
	code, out := judge()
	if code != 1 || !strings.Contains(out, "FAIL: 1 scenario(s)") || !strings.Contains(out, "2026-07-28 completion-complete") {
		t.Fatalf("exit %d with an unlisted regression:\n%s", code, out)
	}

	write("server:\n  \"2025-11-25\":\n    completion-complete: not relayed\n  \"2026-07-28\":\n    completion-complete: not relayed\n  tasks:\n    tasks-mrtr-input: not relayed\n")
	code, out = judge()
	if code != 0 || !strings.Contains(out, "PASS:") || !strings.Contains(out, "== tasks:") {
		t.Fatalf("exit %d with every failure listed:\n%s", code, out)
	}
	table, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(table), "| 2025-11-25 | everything-server, stateful | 2 | 2 | 1 | 1 | 1 |") ||
		!strings.Contains(string(table), "| tasks extension (2026-07-28 wire) | sim/conformanceserver | 2 | – | 1 | 1 | 1 |") {
		t.Fatalf("Markdown table:\n%s", table)
	}

	// The tasks run's baseline section is judged as the others are.
	write("server:\n  \"2025-11-25\":\n    completion-complete: not relayed\n  \"2026-07-28\":\n    completion-complete: not relayed\n  tasks:\n    tasks-lifecycle: not yet\n")
	code, out = judge()
	if code != 1 || !strings.Contains(out, "FAIL: 1 baseline entr(ies) are stale") || !strings.Contains(out, "  tasks tasks-lifecycle\n") ||
		!strings.Contains(out, "FAIL: 1 scenario(s)") || !strings.Contains(out, "  tasks tasks-mrtr-input\n") {
		t.Fatalf("exit %d with a stale tasks entry and a tasks failure:\n%s", code, out)
	}
	if table, err = os.ReadFile(md); err != nil || !strings.Contains(string(table), "| tasks extension (2026-07-28 wire) | sim/conformanceserver | 2 | – | 1 | 1 | 0 |") {
		t.Fatalf("Markdown table with the tasks run: %v\n%s", err, table)
	}

	// A scenario that passes on the fast path and not on the SDK path fails
	// the run, though everything else holds.
	write("server:\n  \"2025-11-25\":\n    completion-complete: not relayed\n  \"2026-07-28\":\n    completion-complete: not relayed\n  tasks:\n    tasks-mrtr-input: not relayed\n")
	if err := os.RemoveAll(filepath.Join(results, "2026-07-28", "sdk-path")); err != nil {
		t.Fatal(err)
	}
	writeResult(t, filepath.Join(results, "2026-07-28", "sdk-path"), "ping", failingChecks)
	writeResult(t, filepath.Join(results, "2026-07-28", "sdk-path"), "completion-complete", failingChecks)
	code, out = judge()
	if code != 1 || !strings.Contains(out, "FAIL: 1 scenario(s) pass through taskgate on one path and not on the other") ||
		!strings.Contains(out, "  2026-07-28 ping\n") || strings.Contains(out, "FAIL: 1 scenario(s) fail through taskgate") {
		t.Fatalf("exit %d with ping failing on the SDK path only:\n%s", code, out)
	}
	if table, err = os.ReadFile(md); err != nil || !strings.Contains(string(table), "| 2026-07-28 | everything-server, stateless | 2 | 2 | 1 | 0 | 1 |") {
		t.Fatalf("Markdown table with ping failing on the SDK path: %v\n%s", err, table)
	}

	if err := os.RemoveAll(filepath.Join(results, "2025-11-25", "sdk-path")); err != nil {
		t.Fatal(err)
	}
	if code, err := run([]string{"-results", results, "-baseline", baseline}, &strings.Builder{}); code != 2 || err == nil {
		t.Fatalf("a run without its SDK-path results: exit %d, %v; want 2 and an error", code, err)
	}
	writeResult(t, filepath.Join(results, "2025-11-25", "sdk-path"), "ping", passingChecks)
	if code, err := run([]string{"-results", results, "-baseline", baseline}, &strings.Builder{}); code == 2 || err != nil {
		t.Fatalf("with the SDK-path results back: exit %d, %v; want a verdict", code, err)
	}

	for _, r := range []Run{RunTasks, Run20260728} {
		if err := os.RemoveAll(filepath.Join(results, string(r))); err != nil {
			t.Fatal(err)
		}
		if code, err := run([]string{"-results", results, "-baseline", baseline}, &strings.Builder{}); code != 2 || err == nil {
			t.Fatalf("a missing %s run: exit %d, %v; want 2 and an error", r, code, err)
		}
	}
}
