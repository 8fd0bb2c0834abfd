package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/taskgate/taskgate/api"
	"github.com/taskgate/taskgate/ledger"
)

func TestBudgetsCreateListShowClose(t *testing.T) {
	l := newLedger(t)
	out := l.ok(t, "budgets", "create", "--tenant", "acme", "--tool-prefix", "hosted_test.", "--max-total-cost", "100.00", "--max-remote-jobs", "10",
		"--period", "day", "--time-zone", "Europe/Berlin", "--per-operation-cap", "25.00", "--expires-in", "720h", "--note", "CI suites", "--json")
	var v api.BudgetView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("budgets create --json printed %q: %v", out, err)
	}
	if v.ID == 0 || v.Tenant != "acme" || v.ToolPrefix != "hosted_test." || v.MaxTotalCost != "100.00" || v.Period != "day" ||
		v.TimeZone != "Europe/Berlin" || v.PerOperationCap != "25.00" || v.Status != api.BudgetOpen || v.CreatedBy == "" {
		t.Fatalf("budgets create --json = %+v", v)
	}
	list := l.ok(t, "budgets", "list", "--tenant", "acme")
	if !regexp.MustCompile(fmt.Sprintf(`(?m)^%d +hosted_test\.\* +day +100\.00 USD +100\.00 +10 of 10 `, v.ID)).MatchString(list) {
		t.Errorf("budgets list printed\n%s", list)
	}
	show := l.ok(t, "budgets", "show", fmt.Sprint(v.ID), "--tenant", "acme")
	for _, want := range []string{`remaining +100\.00 USD, 10 remote job\(s\)\n`, `period +day \(Europe/Berlin\)\n`, `note +CI suites\n`} {
		if !regexp.MustCompile(want).MatchString(show) {
			t.Errorf("budgets show printed\n%s\nwant a line matching %q", show, want)
		}
	}
	checkFailure(t, l.run(t, "budgets", "show", fmt.Sprint(v.ID), "--tenant", "globex"), `tenant "globex" has no budget`, true)
	l.ok(t, "budgets", "close", fmt.Sprint(v.ID), "--tenant", "acme")
	b, err := l.store.BudgetGet(context.Background(), "acme", v.ID)
	if err != nil || b.ClosedAt.IsZero() || b.ClosedBy == "" {
		t.Fatalf("budget after close = %+v, %v; want closed by the user", b, err)
	}
	if events, err := l.store.BudgetEventList(context.Background(), v.ID); err != nil || len(events) != 2 || events[1].Kind != ledger.BudgetClosed {
		t.Fatalf("events = %+v, %v", events, err)
	}
}

func TestBudgetsCreateBadFlags(t *testing.T) {
	l := newLedger(t)
	base := []string{"budgets", "create", "--tenant", "acme", "--max-total-cost", "100.00", "--max-remote-jobs", "10", "--expires-in", "24h"}
	checkFailure(t, l.run(t, append(base, "--period", "fortnight")...), `--period: "fortnight" is not a period`, true)
	checkFailure(t, l.run(t, append(base, "--period", "day", "--time-zone", "Mars/Olympus")...), `--time-zone: "Mars/Olympus" is not an IANA time zone`, true)
	checkFailure(t, l.run(t, append(base, "--tool", "run_suite")...), `--tool: "run_suite" is not a qualified tool name`, true)
	checkFailure(t, l.run(t, "budgets", "create", "--tenant", "acme", "--max-total-cost", "1.00", "--expires-in", "24h"), "--max-remote-jobs is required", true)
}

// TestBudgetsShowHostileTextInert: an approver's note and tool prefix are
// stored as given, but what budgets show and list print holds no escape
// sequence or bidi control that could steer the reader's terminal.
func TestBudgetsShowHostileTextInert(t *testing.T) {
	l := newLedger(t)
	note := "ok\x1b]8;;https://evil.example\x07click\x1b]8;;\x07 \x1b[2J\u202egnp.exe [x](../requests/1/approve?x=)"
	out := l.ok(t, "budgets", "create", "--tenant", "acme", "--tool-prefix", "hosted_test.", "--max-total-cost", "100.00", "--max-remote-jobs", "10",
		"--expires-in", "720h", "--note", note, "--json")
	var v api.BudgetView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("budgets create --json printed %q: %v", out, err)
	}
	for _, printed := range []string{
		l.ok(t, "budgets", "show", fmt.Sprint(v.ID), "--tenant", "acme"),
		l.ok(t, "budgets", "list", "--tenant", "acme"),
	} {
		if strings.ContainsAny(printed, "\x1b\x07\u202e") {
			t.Errorf("budgets printed a control character:\n%q", printed)
		}
	}
}
