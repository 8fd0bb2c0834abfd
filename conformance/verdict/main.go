// Command verdict judges a conformance run. It reads the official suite's
// results for each run, directly against the upstream, through taskgate,
// and through taskgate with every pass-through call on the SDK path (the
// test switch TASKGATE_TEST_SDK_PATH=1), compares them scenario by scenario
// with each other and with the committed baseline
// (conformance/baseline.yml), prints a summary table and writes the counts
// as a Markdown table. It exits 1 when a scenario passes through taskgate
// on one path and not on the other, when a scenario that must pass through
// taskgate fails there without a baseline entry, or when a baseline entry is
// stale (its scenario now passes, or is no longer judged), so the baseline
// only ever shrinks as taskgate improves.
//
// It only reads results and writes the table: it never runs the suite or
// starts a process (conformance/run does).
//
// Usage:
//
//	verdict -results DIR -baseline conformance/baseline.yml [-markdown FILE]
//
// DIR holds one directory per run (2025-11-25, 2026-07-28, tasks), each with
// direct/, gateway/ and sdk-path/ as written by the suite's -o option; the
// tasks run has no direct/. A missing run, or a missing directory of one, is
// an error.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	code, err := run(os.Args[1:], os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "verdict:", err)
	}
	os.Exit(code)
}

// run returns 0 when the run holds, 1 when it fails, 2 when it cannot be
// judged.
func run(args []string, stdout io.Writer) (int, error) {
	fs := flag.NewFlagSet("verdict", flag.ContinueOnError)
	results := fs.String("results", "", "the directory with one directory per run (2025-11-25, 2026-07-28, tasks)")
	baselinePath := fs.String("baseline", "", "the baseline file (conformance/baseline.yml)")
	markdown := fs.String("markdown", "", "write the counts table as Markdown to this file")
	if err := fs.Parse(args); err != nil {
		return 2, err
	}
	if *results == "" || *baselinePath == "" {
		return 2, errors.New("-results and -baseline are required")
	}
	base, err := loadBaseline(*baselinePath)
	if err != nil {
		return 2, err
	}
	var judged []Judged
	for _, r := range allRuns() {
		dir := filepath.Join(*results, string(r))
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			return 2, fmt.Errorf("no results for the %s run in %s: conformance/run writes them there", r, dir)
		}
		direct := map[string]Outcome{}
		if !r.GatewayOnly() {
			if direct, err = readResults(filepath.Join(dir, "direct")); err != nil {
				return 2, err
			}
		}
		gateway, err := readResults(filepath.Join(dir, "gateway"))
		if err != nil {
			return 2, err
		}
		sdkPath, err := readResults(filepath.Join(dir, "sdk-path"))
		if err != nil {
			return 2, err
		}
		judged = append(judged, Judged{Run: r, Rows: Judge(r, direct, gateway, sdkPath, base[r])})
	}
	printSummary(stdout, judged)
	if *markdown != "" {
		if err := os.WriteFile(*markdown, []byte(Markdown(judged)), 0o644); err != nil {
			return 2, fmt.Errorf("write the Markdown table: %w", err)
		}
	}
	if failing(judged) > 0 {
		return 1, nil
	}
	return 0, nil
}

func failing(judged []Judged) int {
	n := 0
	for _, j := range judged {
		for _, row := range j.Rows {
			if row.Verdict.Fails() {
				n++
			}
		}
	}
	return n
}

func printSummary(w io.Writer, judged []Judged) {
	for _, j := range judged {
		fmt.Fprintf(w, "\n== %s: %s\n", j.Run, j.Run.Describe())
		width := len("scenario")
		for _, row := range j.Rows {
			width = max(width, len(row.Scenario))
		}
		fmt.Fprintf(w, "   %-*s  %-8s  %-8s  %-8s  %s\n", width, "scenario", "directly", "taskgate", "SDK path", "verdict")
		for _, row := range j.Rows {
			fmt.Fprintf(w, "   %-*s  %-8s  %-8s  %-8s  %s\n", width, row.Scenario, row.Direct, row.Gateway, row.SDKPath, row.Explain())
		}
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, Markdown(judged))
	fmt.Fprintln(w)
	var diverging, regressions, stale []string
	for _, j := range judged {
		for _, row := range j.Rows {
			switch row.Verdict {
			case Diverges:
				diverging = append(diverging, fmt.Sprintf("%s %s", j.Run, row.Scenario))
			case Regression:
				regressions = append(regressions, fmt.Sprintf("%s %s", j.Run, row.Scenario))
			case Stale:
				stale = append(stale, fmt.Sprintf("%s %s", j.Run, row.Scenario))
			}
		}
	}
	if len(diverging) > 0 {
		fmt.Fprintf(w, "FAIL: %d scenario(s) pass through taskgate on one path and not on the other (the fast path, and the SDK path that TASKGATE_TEST_SDK_PATH=1 forces); both must behave the same, so fix the path that fails (the logs of each are in logs/):\n", len(diverging))
		for _, s := range diverging {
			fmt.Fprintf(w, "  %s\n", s)
		}
	}
	if len(regressions) > 0 {
		fmt.Fprintf(w, "FAIL: %d scenario(s) fail through taskgate without a baseline entry (fix taskgate, or add the scenario with a reason under its run in conformance/baseline.yml):\n", len(regressions))
		for _, s := range regressions {
			fmt.Fprintf(w, "  %s\n", s)
		}
	}
	if len(stale) > 0 {
		fmt.Fprintf(w, "FAIL: %d baseline entr(ies) are stale (delete their lines from conformance/baseline.yml):\n", len(stale))
		for _, s := range stale {
			fmt.Fprintf(w, "  %s\n", s)
		}
	}
	if len(diverging)+len(regressions)+len(stale) == 0 {
		fmt.Fprintln(w, "PASS: every scenario passes through taskgate on the fast path exactly when it does on the SDK path, every scenario that must pass through taskgate passes there or is in the baseline, and no baseline entry is stale.")
	}
}

// Markdown renders the counts of each run as a table.
func Markdown(judged []Judged) string {
	var b strings.Builder
	b.WriteString("| requirement set | upstream | scenarios | pass directly | pass through taskgate | pass through taskgate, SDK path only | baselined |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, j := range judged {
		c := Count(j.Rows)
		direct := fmt.Sprint(c.Direct)
		if j.Run.GatewayOnly() {
			direct = "–"
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %d | %d | %d |\n", j.Run.Label(), j.Run.Upstream(), c.Scenarios, direct, c.Gateway, c.SDKPath, c.Baselined)
	}
	return b.String()
}
