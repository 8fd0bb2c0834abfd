package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/taskgate/taskgate/canon"
	"github.com/taskgate/taskgate/cmd/taskgate/cli"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/sim/providersim"
)

// TestUsageErrors checks mistakes in how taskgate is called: each is one
// Error: line and a Try: hint, with exit status 1, and changes nothing.
func TestUsageErrors(t *testing.T) {
	l := newLedger(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown command", []string{"bogus"}, `unknown command "bogus" for "taskgate"`},
		{"mistyped command", []string{"recipt", "op-1"}, `unknown command "recipt" for "taskgate"; did you mean "receipt"?`},
		{"mistyped ops subcommand", []string{"ops", "shw", "op-1"}, `unknown command "shw" for "taskgate ops"; did you mean "show"?`},
		{"mistyped keys subcommand", []string{"keys", "crate"}, `unknown command "crate" for "taskgate keys"; did you mean "create"?`},
		{"mistyped approvals subcommand", []string{"approvals", "lst"}, `unknown command "lst" for "taskgate approvals"; did you mean "list"?`},
		{"unknown log level", []string{"--log-level", "loud", "ops", "list"}, `--log-level "loud" is not a log level; use debug, info, warn, error`},
		{"unknown state", []string{"ops", "list", "--state", "running,bogus"}, `--state "bogus" is not an operation state; the states are awaiting_approval, accepted, sending, running, input_required, review, completed, failed, cancelled`},
		{"no limit", []string{"ops", "list", "--limit", "0"}, "--limit 0: list at least one operation"},
		{"ops show without an ID", []string{"ops", "show"}, "expected one argument, the operation ID or task ID; got 0"},
		{"demo with a ledger", []string{"demo"}, "--db does not apply: demo runs on a temporary ledger of its own"},
		{"provider-sim with a ledger", []string{"provider-sim"}, "--db does not apply: provider-sim keeps its own record"},
		{"version with a ledger", []string{"version"}, "--db does not apply: version reads no ledger"},
		{"unknown role", []string{"keys", "create", "--tenant", "acme", "--role", "admin"}, `--role "admin" is not a role; use agent or approver`},
		{"empty tenant", []string{"keys", "create", "--tenant", " "}, "--tenant is empty"},
		{"reconcile without configuration", []string{"reconcile"}, "--config is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkFailure(t, l.run(t, tc.args...), tc.want, true)
		})
	}
	if r := l.run(t, "bogus"); !strings.Contains(r.stderr, "\nTry: taskgate --help\n") {
		t.Errorf("an unknown command printed %q, want the hint taskgate --help", r.stderr)
	}
	if keys, err := l.store.KeyList(context.Background(), ""); err != nil || len(keys) != 0 {
		t.Errorf("after only usage errors the ledger holds keys %v (%v), want none", keys, err)
	}
}

// A command that only groups others prints its help when called alone.
func TestGroupsPrintHelp(t *testing.T) {
	l := newLedger(t)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"taskgate demo", "serve", "ops"}},
		{[]string{"ops"}, []string{"list", "show", "resolve"}},
		{[]string{"keys"}, []string{"create", "list", "revoke"}},
		{[]string{"approvals"}, []string{"list", "revoke"}},
	} {
		r := l.run(t, tc.args...)
		if r.code != 0 || r.stderr != "" {
			t.Errorf("taskgate %s: exit %d, stderr %q; want its help and exit 0", strings.Join(tc.args, " "), r.code, r.stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("taskgate %s printed\n%s\nwant it to mention %q", strings.Join(tc.args, " "), r.stdout, w)
			}
		}
	}
}

func TestOpsList(t *testing.T) {
	l := newLedger(t)
	l.completed(t, "acme", "op-done")
	l.inReview(t, "op-review")
	l.accept(t, "globex", "op-new", false)

	list := func(args ...string) []string {
		t.Helper()
		var views []struct {
			OperationID string `json:"operation_id"`
		}
		out := l.ok(t, append([]string{"ops", "list", "--json"}, args...)...)
		if err := json.Unmarshal([]byte(out), &views); err != nil {
			t.Fatalf("ops list --json printed %q: %v", out, err)
		}
		ids := make([]string, len(views))
		for i, v := range views {
			ids[i] = v.OperationID
		}
		return ids
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "op-new op-review op-done"},
		{[]string{"--state", "review,accepted"}, "op-new op-review"},
		{[]string{"--state", "completed", "--state", "failed"}, "op-done"},
		{[]string{"--tenant", "acme"}, "op-review op-done"},
		{[]string{"--limit", "1"}, "op-new"},
	} {
		if got := strings.Join(list(tc.args...), " "); got != tc.want {
			t.Errorf("ops list %s = %s, want %s", strings.Join(tc.args, " "), got, tc.want)
		}
	}
}

// ops show counts attempts as the receipt does: a retry denied under a new
// operation ID belongs to the operation, apart from its attempts.
func TestOpsShowCountsAttemptsLikeTheReceipt(t *testing.T) {
	l := newLedger(t)
	op := l.completed(t, "acme", "settlement-regression-842")
	args := json.RawMessage(`{"suite":"settlement"}`)
	fp, err := canon.Compute("hosted_test", "run_suite", args)
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.store.Accept(context.Background(), &ledger.AcceptParams{
		Tenant: "acme", OperationID: "settlement-regression-842-retry", Upstream: "hosted_test", Tool: "run_suite", Fingerprint: string(fp),
		Arguments: args, RequestID: ledger.NewRequestID(), TaskID: ledger.NewTaskID(), Source: "test", RetryPolicy: "lookup_then_attach", Priced: true,
		Approval: ledger.ApprovalRequirement{Required: true, Estimate: money.MustParse("18.00", "USD")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Decision != ledger.DecisionDenied || res.Reason != ledger.ReasonRetryUsesNewOperation {
		t.Fatalf("the retry under a new operation ID was %s (%s), want denied as %s", res.Decision, res.Reason, ledger.ReasonRetryUsesNewOperation)
	}

	out := l.ok(t, "ops", "show", op.OperationID)
	if want := "\nattempts (2: 1 under this operation ID, 1 denied under another)\n"; !strings.Contains(out, want) {
		t.Errorf("ops show printed\n%s\nwant %q", out, want)
	}
	if want := `(?m)^estimated cost +18\.00 USD$`; !regexp.MustCompile(want).MatchString(out) {
		t.Errorf("ops show printed\n%s\nwant a line matching %q", out, want)
	}
	r := receiptJSON(t, []byte(l.ok(t, "receipt", op.OperationID, "--format", "json")))
	if r["attempts"] != 1.0 || r["denied_attempts"] != 1.0 {
		t.Errorf("receipt attempts = %v, denied_attempts = %v; want 1 and 1, as ops show counts them", r["attempts"], r["denied_attempts"])
	}

	var detail struct {
		Charges []map[string]any `json:"charges"`
	}
	if err := json.Unmarshal([]byte(l.ok(t, "ops", "show", op.OperationID, "--json")), &detail); err != nil {
		t.Fatal(err)
	}
	if len(detail.Charges) != 1 || detail.Charges[0]["amount"] != "17.84" || detail.Charges[0]["currency"] != "USD" {
		t.Errorf("ops show --json charges = %v, want one of 17.84 USD", detail.Charges)
	}
}

// An operation ID may look like a task ID; it is found either way.
func TestFindOperationByTaskOrOperationID(t *testing.T) {
	l := newLedger(t)
	op := l.accept(t, "acme", "task-report-7", false)
	for _, id := range []string{op.OperationID, op.TaskID} {
		out := l.ok(t, "ops", "show", id)
		if !regexp.MustCompile(`(?m)^operation +task-report-7$`).MatchString(out) || !regexp.MustCompile(`(?m)^task +`+op.TaskID+` `).MatchString(out) {
			t.Errorf("ops show %s printed\n%s\nwant operation task-report-7 with task %s", id, out, op.TaskID)
		}
	}
	checkFailure(t, l.run(t, "ops", "show", "task-none"), `no operation "task-none"`, false)
}

// provider-sim --help lists every fault the simulator knows, with the
// syntax of its value.
func TestProviderSimHelpListsFaults(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := cli.Main(context.Background(), []string{"provider-sim", "--help"}, &stdout, &stderr, func(string) string { return "" })
	if code != 0 {
		t.Fatalf("provider-sim --help: exit %d, stderr %q", code, stderr.String())
	}
	for _, name := range providersim.FaultNames() {
		if !regexp.MustCompile(`(?m)^  ` + name + `(\[?=[A-Z|]+\]?)? +\S`).MatchString(stdout.String()) {
			t.Errorf("provider-sim --help does not describe fault %s:\n%s", name, stdout.String())
		}
	}
	for _, syntax := range []string{"drop_response_after_accept[=N]", "lookup_delay=DURATION", "overcharge=AMOUNT", "slow[=FACTOR|DURATION]"} {
		if !strings.Contains(stdout.String(), syntax) {
			t.Errorf("provider-sim --help does not give the syntax %s", syntax)
		}
	}
}

// TestVersion checks that taskgate version and taskgate --version print
// the build's account, the Go version that built the test among it.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var stdout, stderr bytes.Buffer
		code := cli.Main(context.Background(), args, &stdout, &stderr, func(string) string { return "" })
		if code != 0 || stderr.Len() != 0 {
			t.Fatalf("taskgate %s = %d, stderr %q", args[0], code, stderr.String())
		}
		want := "taskgate dev\ncommit:  unknown\nbuilt:   unknown\ngo:      " + runtime.Version() + "\n"
		if stdout.String() != want {
			t.Errorf("taskgate %s printed\n%s\nwant\n%s", args[0], stdout.String(), want)
		}
	}
}

// An ID may begin with "-": a kid is base64url, an operation ID the
// model's choice. Given as it is, it reads as a flag, and the hint says to
// put it after "--"; the commands taskgate prints with such an ID run as
// printed.
func TestAnIDThatBeginsWithADash(t *testing.T) {
	l := newLedger(t)
	const id = "-rf-842"
	l.accept(t, "acme", id, false)
	l.accept(t, "evil", id, false)

	r := l.run(t, "ops", "show", id)
	checkFailure(t, r, "unknown shorthand flag: 'r' in -rf-842", true)
	if !strings.Contains(r.stderr, "Try: taskgate ops show [flags] -- ID, when the ID begins with -") {
		t.Errorf("ops show %s printed %q; want a hint to put the ID after --", id, r.stderr)
	}
	r = l.run(t, "ops", "show", "--", id)
	checkFailure(t, r, `operation ID "-rf-842" is used by several tenants`, true)
	_, printed, ok := strings.Cut(r.stderr, "Try: taskgate ")
	if !ok {
		t.Fatalf("ops show -- %s printed %q; want a command naming one tenant", id, r.stderr)
	}
	var tenant string
	if _, err := fmt.Sscanf(printed, "ops show --tenant %s -- -rf-842\n", &tenant); err != nil || (tenant != "acme" && tenant != "evil") {
		t.Fatalf("the printed command is taskgate %q, want taskgate ops show --tenant acme|evil -- -rf-842 (%v)", printed, err)
	}
	if out := l.ok(t, strings.Fields(printed)...); !strings.Contains(out, tenant) {
		t.Errorf("the printed command showed %q; want %s's operation", out, tenant)
	}

	// As a flag's value (how_to_approve names the operation so) it needs
	// no "--".
	l.ok(t, "approve", "--tenant", "acme", "--operation-id", id, "--tool", "hosted_test.run_suite",
		"--max-total-cost", "20.00", "--max-remote-jobs", "1", "--expires-in", "1h")
	if out := l.ok(t, "approvals", "list", "--tenant", "acme"); !strings.Contains(out, id) {
		t.Errorf("approvals list printed %q; want the approval of %s", out, id)
	}

	// A command that takes no ID keeps the plain hint.
	r = l.run(t, "ops", "list", "-x")
	if !strings.Contains(r.stderr, "Try: taskgate ops list --help\n") {
		t.Errorf("ops list -x printed %q; want the plain --help hint", r.stderr)
	}
}
