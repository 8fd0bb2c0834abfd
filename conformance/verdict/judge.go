package main

import (
	"slices"
	"strings"
)

// Run is one run of the suite: a requirement set against one upstream.
type Run string

const (
	// Run20251125 is the 2025-11-25 active suite against a stateful
	// everything-server.
	Run20251125 Run = "2025-11-25"
	// Run20260728 is the 2026-07-28 requirement set against a stateless
	// everything-server.
	Run20260728 Run = "2026-07-28"
	// RunTasks is each tasks-* extension scenario through taskgate in front
	// of the tasks fixture (sim/conformanceserver).
	RunTasks Run = "tasks"
)

func allRuns() []Run { return []Run{Run20251125, Run20260728, RunTasks} }

// GatewayOnly reports whether the run goes through taskgate only, so that
// every scenario must pass there. The tasks fixture offers plain tools and
// taskgate makes the tasks, so directly it has nothing to compare; against
// everything-server, scenarios it fails itself are not taskgate's failures.
func (r Run) GatewayOnly() bool { return r == RunTasks }

// Label names the run in the Markdown table.
func (r Run) Label() string {
	if r == RunTasks {
		return "tasks extension (2026-07-28 wire)"
	}
	return string(r)
}

// Upstream names the server the run is against.
func (r Run) Upstream() string {
	switch r {
	case Run20251125:
		return "everything-server, stateful"
	case Run20260728:
		return "everything-server, stateless"
	default:
		return "sim/conformanceserver"
	}
}

// Describe says what the run is, for the summary.
func (r Run) Describe() string {
	switch r {
	case Run20251125:
		return "the 2025-11-25 active suite against go-sdk's everything-server (stateful)"
	case Run20260728:
		return "--requirements 2026-07-28 against go-sdk's everything-server (stateless)"
	default:
		return "each tasks-* extension scenario through taskgate in front of sim/conformanceserver"
	}
}

// Outcome is what one scenario did in one place.
type Outcome int

const (
	// NotRun: the suite left no result for the scenario.
	NotRun Outcome = iota
	// Passed: no check failed.
	Passed
	// Failed: a check failed, or the result could not be read.
	Failed
)

func (o Outcome) String() string {
	switch o {
	case Passed:
		return "pass"
	case Failed:
		return "FAIL"
	default:
		return "-"
	}
}

// Verdict is the judgement of one scenario of a run.
type Verdict int

const (
	// Holds: the scenario passes through taskgate, or need not.
	Holds Verdict = iota
	// NotJudged: the scenario fails directly, so taskgate is not judged on it.
	NotJudged
	// Expected: the scenario fails through taskgate and the baseline says why.
	Expected
	// Regression: the scenario must pass through taskgate, fails there, and
	// is not in the baseline. It fails the run.
	Regression
	// Stale: the baseline lists the scenario, but it passes through taskgate
	// or is not judged. It fails the run, so the baseline shrinks.
	Stale
	// Diverges: the scenario passes through taskgate on one path and not on
	// the other: the fast path (pass-through calls relayed as bytes) and the
	// SDK path (every pass-through call through the go-sdk server, forced by
	// the test switch TASKGATE_TEST_SDK_PATH). It fails the run, whatever the
	// baseline says: both paths must behave the same.
	Diverges
)

func (v Verdict) String() string {
	return [...]string{"holds", "not judged", "expected", "regression", "stale", "diverges"}[v]
}

// Fails reports whether the verdict fails the run.
func (v Verdict) Fails() bool { return v == Regression || v == Stale || v == Diverges }

// Row is one scenario of a run, judged.
type Row struct {
	Scenario string
	Direct   Outcome
	Gateway  Outcome
	// SDKPath is the outcome through taskgate with every pass-through call
	// on the SDK path.
	SDKPath Outcome
	Verdict Verdict
	// Reason is the baseline's reason, when the scenario has an entry.
	Reason string
}

// Explain says the verdict in words a reader of the CI log can act on.
func (r Row) Explain() string {
	switch r.Verdict {
	case Holds:
		if r.Gateway == Passed {
			return "ok"
		}
		return "ok (not required)"
	case NotJudged:
		return "not judged: fails directly"
	case Expected:
		return "baselined: " + r.Reason
	case Diverges:
		if r.Gateway == Passed {
			return "DIVERGES: passes through taskgate, fails there on the SDK path only"
		}
		return "DIVERGES: fails through taskgate, passes there on the SDK path only: the fast path differs"
	case Regression:
		if r.Direct == Passed {
			return "REGRESSION: passes directly, fails through taskgate, not in the baseline"
		}
		return "REGRESSION: must pass through taskgate, fails there, not in the baseline"
	default:
		if !r.ran() {
			return "STALE baseline entry: the scenario did not run"
		}
		if r.Gateway == Passed {
			return "STALE baseline entry: now passes through taskgate"
		}
		return "STALE baseline entry: fails directly too, so taskgate is not judged on it"
	}
}

// ran reports whether the scenario ran anywhere.
func (r Row) ran() bool { return r.Direct != NotRun || r.Gateway != NotRun || r.SDKPath != NotRun }

// Judged is one run with its rows.
type Judged struct {
	Run  Run
	Rows []Row
}

// Judge compares a run's results, directly, through taskgate and through
// taskgate on the SDK path only, with each other and with the run's
// baseline entries (scenario to reason). Rows come sorted by scenario.
func Judge(r Run, direct, gateway, sdkPath map[string]Outcome, baseline map[string]string) []Row {
	names := map[string]bool{}
	for _, m := range []map[string]Outcome{direct, gateway, sdkPath} {
		for s := range m {
			names[s] = true
		}
	}
	for s := range baseline {
		names[s] = true
	}
	var rows []Row
	for s := range names {
		reason, listed := baseline[s]
		row := Row{Scenario: s, Direct: direct[s], Gateway: gateway[s], SDKPath: sdkPath[s], Reason: reason}
		row.Verdict = decide(r, row, listed)
		rows = append(rows, row)
	}
	slices.SortFunc(rows, func(a, b Row) int { return strings.Compare(a.Scenario, b.Scenario) })
	return rows
}

// decide is the rule of the whole harness: a scenario passes through
// taskgate on the fast path exactly when it passes there on the SDK path; a
// scenario taskgate must pass either passes through it or is in the
// baseline; and a baseline entry names only such a failure. It reads the
// row's outcomes only.
func decide(r Run, row Row, listed bool) Verdict {
	required := row.ran() && (r.GatewayOnly() || row.Direct == Passed)
	switch {
	case (row.Gateway == Passed) != (row.SDKPath == Passed):
		return Diverges
	case !required && listed:
		return Stale
	case !required && row.Direct == Failed:
		return NotJudged
	case !required:
		return Holds
	case row.Gateway == Passed && listed:
		return Stale
	case row.Gateway == Passed:
		return Holds
	case listed:
		return Expected
	default:
		return Regression
	}
}

// Counts are a run's totals for the Markdown table.
type Counts struct {
	Scenarios, Direct, Gateway, SDKPath, Baselined int
}

// Count totals a run's rows; a baseline entry for a scenario that did not
// run is not a scenario.
func Count(rows []Row) Counts {
	var c Counts
	for _, r := range rows {
		if !r.ran() {
			continue
		}
		c.Scenarios++
		if r.Direct == Passed {
			c.Direct++
		}
		if r.Gateway == Passed {
			c.Gateway++
		}
		if r.SDKPath == Passed {
			c.SDKPath++
		}
		if r.Verdict == Expected {
			c.Baselined++
		}
	}
	return c
}
