package cli_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/api"
	"github.com/taskgate/taskgate/ledger"
)

// approveArgs is an approve command with every required flag but the
// expiry, followed by extra.
func approveArgs(extra ...string) []string {
	return append([]string{"approve", "--tenant", "acme", "--operation-id", "settlement-regression-842",
		"--tool", "hosted_test.run_suite", "--max-total-cost", "20.00", "--max-remote-jobs", "1"}, extra...)
}

func TestApproveListRevoke(t *testing.T) {
	l := newLedger(t)
	before := time.Now()
	out := l.ok(t, approveArgs("--expires-in", "24h", "--json")...)
	after := time.Now()
	var v api.ApprovalView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("approve --json printed %q: %v", out, err)
	}
	if v.ID == 0 || v.Tenant != "acme" || v.OperationID != "settlement-regression-842" || v.Tool != "hosted_test.run_suite" ||
		v.MaxTotalCost != "20.00" || v.Currency != "USD" || v.MaxRemoteJobs != 1 || v.RetryPolicy != "lookup_then_attach" || v.Status != api.ApprovalActive {
		t.Errorf("approve --json = %+v, want acme's active approval of hosted_test.run_suite up to 20.00 USD, 1 job, lookup_then_attach", v)
	}
	if v.ExpiresAt.Before(before.Add(24*time.Hour).Truncate(time.Microsecond)) || v.ExpiresAt.After(after.Add(24*time.Hour)) {
		t.Errorf("expires_at = %s, want 24h after the command ran (%s to %s)", v.ExpiresAt, before, after)
	}
	if !strings.Contains(out, `"max_total_cost": "20.00"`) {
		t.Errorf("approve --json = %s, want the ceiling as the string \"20.00\"", out)
	}

	stored, err := l.store.ApprovalGet(context.Background(), v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.MaxTotalCost.Micros != 20_000_000 || stored.CreatedBy == "" {
		t.Errorf("stored ceiling %d micros, created by %q; want 20000000 and the user's name", stored.MaxTotalCost.Micros, stored.CreatedBy)
	}

	text := l.ok(t, approveArgs("--operation-id", "other-op", "--expires-at", "2099-01-02T03:04:05Z")...)
	for _, want := range []string{`operation_id +other-op\n`, `max_total_cost +20\.00 USD\n`, `expires_at +2099-01-02T03:04:05Z\n`} {
		if !regexp.MustCompile(want).MatchString(text) {
			t.Errorf("approve printed\n%s\nwant a line matching %q", text, want)
		}
	}
	// The ceiling is printed with its own currency.
	eur := l.ok(t, approveArgs("--operation-id", "euro-op", "--currency", "EUR", "--expires-in", "1h")...)
	if !regexp.MustCompile(`max_total_cost +20\.00 EUR\n`).MatchString(eur) || strings.Contains(eur, "USD") || strings.Contains(eur, "_usd") {
		t.Errorf("approve --currency EUR printed\n%s\nwant the ceiling as 20.00 EUR and no USD", eur)
	}

	list := listApprovals(t, l, "--tenant", "acme", "--operation-id", "settlement-regression-842")
	if len(list) != 1 || list[0].ID != v.ID || list[0].Status != api.ApprovalActive {
		t.Fatalf("approvals list = %+v, want approval %d active", list, v.ID)
	}
	if table := l.ok(t, "approvals", "list", "--tenant", "acme"); !strings.Contains(table, "settlement-regression-842") || !strings.Contains(table, "other-op") || !strings.Contains(table, "20.00 EUR") {
		t.Errorf("approvals list table =\n%s\nwant both approvals", table)
	}

	checkFailure(t, l.run(t, "approvals", "revoke", itoa(v.ID), "--tenant", "globex"), `tenant "globex" has no approval`, true)
	if got := listApprovals(t, l, "--tenant", "acme", "--operation-id", "settlement-regression-842"); len(got) != 1 {
		t.Fatalf("after another tenant's revoke, approvals = %+v, want still active", got)
	}

	if out := l.ok(t, "approvals", "revoke", itoa(v.ID), "--tenant", "acme"); !strings.Contains(out, "revoked") {
		t.Errorf("approvals revoke printed %q", out)
	}
	if got := listApprovals(t, l, "--tenant", "acme", "--operation-id", "settlement-regression-842"); len(got) != 0 {
		t.Errorf("approvals list after revoke = %+v, want none", got)
	}
	all := listApprovals(t, l, "--tenant", "acme", "--operation-id", "settlement-regression-842", "--all")
	if len(all) != 1 || all[0].Status != api.ApprovalRevoked || all[0].RevokedAt.IsZero() {
		t.Errorf("approvals list --all = %+v, want the approval revoked", all)
	}
}

func listApprovals(t *testing.T, l *ledgerFile, args ...string) []api.ApprovalView {
	t.Helper()
	out := l.ok(t, append([]string{"approvals", "list", "--json"}, args...)...)
	var list []api.ApprovalView
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("approvals list --json printed %q: %v", out, err)
	}
	if list == nil {
		t.Fatalf("approvals list --json printed %q, want a JSON array", out)
	}
	return list
}

// --max-cost, the old name of --max-total-cost, is accepted until the next
// release: it approves the same ceiling, says on stderr that it is
// deprecated, and is reported under its own name. Both at once is refused.
func TestApproveDeprecatedMaxCost(t *testing.T) {
	l := newLedger(t)
	oldArgs := func(extra ...string) []string {
		args := approveArgs(extra...)
		for i, a := range args {
			if a == "--max-total-cost" {
				args[i] = "--max-cost"
			}
		}
		return args
	}
	current := l.run(t, approveArgs("--expires-in", "1h", "--json")...)
	old := l.run(t, oldArgs("--operation-id", "old-flag-op", "--expires-in", "1h", "--json")...)
	if current.code != 0 || old.code != 0 {
		t.Fatalf("approve: exit %d (stderr %q) with --max-total-cost, %d (stderr %q) with --max-cost", current.code, current.stderr, old.code, old.stderr)
	}
	if current.stderr != "" {
		t.Errorf("approve --max-total-cost: stderr %q, want nothing", current.stderr)
	}
	if want := "Flag --max-cost has been deprecated, use --max-total-cost; --max-cost will be removed in the next release\n"; old.stderr != want {
		t.Errorf("approve --max-cost: stderr %q, want %q", old.stderr, want)
	}
	var c, o api.ApprovalView
	if err := json.Unmarshal([]byte(current.stdout), &c); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(old.stdout), &o); err != nil {
		t.Fatal(err)
	}
	if o.MaxTotalCost != c.MaxTotalCost || o.Currency != c.Currency || o.MaxRemoteJobs != c.MaxRemoteJobs || o.OperationID != "old-flag-op" {
		t.Errorf("approve --max-cost = %+v, --max-total-cost = %+v; want the same terms", o, c)
	}
	if help := l.ok(t, "approve", "--help"); strings.Contains(help, "--max-cost") {
		t.Errorf("approve --help lists the deprecated --max-cost:\n%s", help)
	}

	r := l.run(t, append(oldArgs("--expires-in", "1h"), "--max-total-cost", "20.00")...)
	checkFailure(t, withoutDeprecation(r), "--max-cost is the deprecated name of --max-total-cost; give only --max-total-cost", true)
	r = l.run(t, "approve", "--tenant", "acme", "--operation-id", "op", "--tool", "hosted_test.run_suite", "--max-cost", "-5", "--max-remote-jobs", "1", "--expires-in", "1h")
	checkFailure(t, withoutDeprecation(r), "--max-cost: -5.00 is negative", true)
}

// withoutDeprecation is r without the flag library's deprecation notice
// at the head of stderr.
func withoutDeprecation(r result) result {
	_, rest, ok := strings.Cut(r.stderr, "will be removed in the next release\n")
	if ok {
		r.stderr = rest
	}
	return r
}

func TestApproveRejectsBadInput(t *testing.T) {
	l := newLedger(t)
	base := approveArgs
	without := func(flag string) []string {
		var args []string
		full := approveArgs("--expires-in", "1h")
		for i := 0; i < len(full); i++ {
			if full[i] == flag {
				i++
				continue
			}
			args = append(args, full[i])
		}
		return args
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"exponent amount", []string{"approve", "--tenant", "acme", "--operation-id", "op", "--tool", "hosted_test.run_suite", "--max-total-cost", "1e3", "--max-remote-jobs", "1", "--expires-in", "1h"}, `--max-total-cost: invalid amount: "1e3"`},
		{"seven decimal places", []string{"approve", "--tenant", "acme", "--operation-id", "op", "--tool", "hosted_test.run_suite", "--max-total-cost", "0.1234567", "--max-remote-jobs", "1", "--expires-in", "1h"}, "more than six decimal places"},
		{"negative amount", []string{"approve", "--tenant", "acme", "--operation-id", "op", "--tool", "hosted_test.run_suite", "--max-total-cost", "-5", "--max-remote-jobs", "1", "--expires-in", "1h"}, "--max-total-cost: -5.00 is negative"},
		{"no tenant", without("--tenant"), "--tenant is required"},
		{"empty tenant", approveArgs("--tenant", "", "--expires-in", "1h"), "--tenant is empty"},
		{"no max cost", without("--max-total-cost"), "--max-total-cost is required"},
		{"no max remote jobs", without("--max-remote-jobs"), "--max-remote-jobs is required"},
		{"several missing", []string{"approve", "--tenant", "acme", "--expires-in", "1h"}, "--operation-id, --tool, --max-total-cost, --max-remote-jobs are required"},
		{"zero remote jobs", []string{"approve", "--tenant", "acme", "--operation-id", "op", "--tool", "hosted_test.run_suite", "--max-total-cost", "5", "--max-remote-jobs", "0", "--expires-in", "1h"}, "--max-remote-jobs: must be at least 1"},
		{"unqualified tool", []string{"approve", "--tenant", "acme", "--operation-id", "op", "--tool", "run_suite", "--max-total-cost", "5", "--max-remote-jobs", "1", "--expires-in", "1h"}, `--tool: "run_suite" is not a qualified tool name`},
		{"unknown retry policy", base("--retry-policy", "resend_always", "--expires-in", "1h"), `--retry-policy: "resend_always" is not a retry policy`},
		{"both expiries", base("--expires-in", "1h", "--expires-at", "2099-01-01T00:00:00Z"), "--expires-in and --expires-at cannot be combined"},
		{"no expiry", base(), "one of --expires-in, --expires-at is required"},
		{"expiry in the past", base("--expires-at", "2001-01-01T00:00:00Z"), "--expires-at: 2001-01-01T00:00:00Z is not in the future"},
		{"expiry not RFC 3339", base("--expires-at", "tomorrow"), `--expires-at "tomorrow" is not an RFC 3339 time`},
		{"expiry not a duration", base("--expires-in", "a day"), `invalid argument "a day" for "--expires-in"`},
		{"bad currency", base("--currency", "dollars", "--expires-in", "1h"), `--currency: "dollars" is not a three-letter currency code`},
		{"operation ID that climbs a path", []string{"approve", "--tenant", "acme", "--operation-id", "../requests/1/approve?x=", "--tool", "hosted_test.run_suite", "--max-total-cost", "5", "--max-remote-jobs", "1", "--expires-in", "1h"},
			`--operation-id: the operation ID holds "/" (U+002F) at byte 2; use only ASCII letters, digits and -._:@+=,~`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkFailure(t, l.run(t, tc.args...), tc.want, true)
		})
	}
	got, err := l.store.ApprovalList(context.Background(), &ledger.ApprovalListParams{Tenant: "acme", IncludeRevoked: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("after only bad input, the ledger holds %d approvals, want none", len(got))
	}
}

func TestApprovalsUsage(t *testing.T) {
	l := newLedger(t)
	checkFailure(t, l.run(t, "approvals", "list"), "--tenant is required", true)
	checkFailure(t, l.run(t, "approvals", "revoke", "1"), "--tenant is required", true)
	checkFailure(t, l.run(t, "approvals", "revoke", "first", "--tenant", "acme"), `approval ID "first" is not a positive number`, true)
}
