package demo

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/packet"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/sim/providersim"
)

// passing is an outcome with the figures the story ends with.
func passing() *Outcome {
	return &Outcome{
		Receipt: &receipt.Receipt{
			OperationID:          OperationID,
			ObservedRemoteJobs:   1,
			FinalCostUSD:         receipt.Money{Amount: money.MustParse("17.84", "USD")},
			ReconciliationStatus: receipt.ReconciliationComplete,
			ReviewStatus:         receipt.ReviewReady,
		},
		Behind:  providersim.Record{Totals: providersim.Totals{JobsStarted: 1, FinalCharges: 1, FinalChargeUSD: providersim.USD(17, 84)}},
		Control: providersim.Record{Totals: providersim.Totals{JobsStarted: 2, FinalCharges: 2, FinalChargeUSD: providersim.USD(35, 68)}},
	}
}

func TestJudge(t *testing.T) {
	tests := []struct {
		name   string
		change func(o *Outcome)
		want   string // a substring of the one problem; empty means none
	}{
		{"the story's figures", func(*Outcome) {}, ""},
		{"no receipt", func(o *Outcome) { o.Receipt = nil }, "no receipt"},
		{"a second remote job", func(o *Outcome) { o.Receipt.ObservedRemoteJobs = 2 }, "observed_remote_jobs: 2, want 1"},
		{"a duplicate", func(o *Outcome) { o.Receipt.DuplicateJobs = 1 }, "duplicate_jobs: 1, want 0"},
		{"charged twice", func(o *Outcome) {
			o.Receipt.FinalCostUSD = receipt.Money{Amount: money.MustParse("35.68", "USD")}
		}, "final_cost_usd: 35.68 USD, want 17.84"},
		{"another currency", func(o *Outcome) {
			o.Receipt.FinalCostUSD = receipt.Money{Amount: money.MustParse("17.84", "EUR")}
		}, "final_cost_usd: 17.84 EUR"},
		{"reconciliation incomplete", func(o *Outcome) {
			o.Receipt.ReconciliationStatus = receipt.ReconciliationIncomplete
		}, "reconciliation_status: incomplete, want complete"},
		{"review needed", func(o *Outcome) { o.Receipt.ReviewStatus = receipt.ReviewNeedsReview }, "review_status: needs_review, want ready"},
		{"two jobs behind taskgate", func(o *Outcome) {
			o.Behind.Totals.JobsStarted, o.Behind.Totals.FinalChargeUSD = 2, providersim.USD(35, 68)
		}, "behind taskgate started 2 job(s) and charged 35.68 USD"},
		{"a control that deduplicated", func(o *Outcome) {
			o.Control.Totals.JobsStarted, o.Control.Totals.FinalChargeUSD = 1, providersim.USD(17, 84)
		}, "control's provider started 1 job(s) and charged 17.84 USD, want 2 and 35.68"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := passing()
			tt.change(o)
			got := judge(o)
			if tt.want == "" {
				if len(got) != 0 {
					t.Fatalf("judge = %q, want no problems", got)
				}
				return
			}
			if len(got) != 1 || !strings.Contains(got[0], tt.want) {
				t.Fatalf("judge = %q, want one problem containing %q", got, tt.want)
			}
		})
	}
}

func TestQuietPrintsOnlyWhatIsAlwaysShown(t *testing.T) {
	for _, quiet := range []bool{false, true} {
		var b bytes.Buffer
		p := &printer{w: &b, quiet: quiet}
		p.step(1, "Setup")
		p.detail("ledger %s", "sqlite:x")
		p.dot()
		p.always("paid_tool_retry_receipt:")
		p.block("a\nb")
		p.always("PASS")
		want := "[1/8] Setup\n      ledger sqlite:x\n      .\npaid_tool_retry_receipt:\n      a\n      b\nPASS\n"
		if quiet {
			want = "paid_tool_retry_receipt:\nPASS\n"
		}
		if got := b.String(); got != want {
			t.Errorf("quiet=%v: printed %q, want %q", quiet, got, want)
		}
	}
}

func TestPrepareDir(t *testing.T) {
	fresh := filepath.Join(t.TempDir(), "new", "demo")
	got, err := prepareDir(fresh)
	if err != nil || got != fresh {
		t.Fatalf("prepareDir(%s) = %q, %v; want the directory created", fresh, got, err)
	}
	if fi, err := os.Stat(fresh); err != nil || !fi.IsDir() {
		t.Fatalf("%s was not created: %v", fresh, err)
	}
	if err := os.WriteFile(filepath.Join(fresh, "taskgate.db"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := prepareDir(fresh); err == nil || !strings.Contains(err.Error(), "not empty (it holds taskgate.db)") {
		t.Fatalf("prepareDir over a ledger = %v, want a refusal", err)
	}
}

func TestSummaryGivesTheVerdict(t *testing.T) {
	failing := passing()
	failing.Problems = []string{"the retry was decided created, not attached"}
	failing.Problems = append(failing.Problems, judge(&Outcome{Receipt: failing.Receipt, Behind: failing.Behind})...)
	tests := []struct {
		name  string
		out   *Outcome
		quiet bool
		want  []string
	}{
		{"pass", passing(), false, []string{
			"[8/8] Summary",
			"without taskgate (the provider's record)  2            35.68 USD",
			"with taskgate (the receipt)               1            17.84 USD",
			"\nPASS: one remote job and 17.84 USD with taskgate",
		}},
		{"pass, quiet", passing(), true, []string{"PASS: one remote job"}},
		{"fail, quiet", failing, true, []string{
			"FAIL: the run departed from the story in 2 way(s):\n",
			"  - the retry was decided created, not attached\n",
			"  - the control's provider started 0 job(s) and charged 0.00 USD, want 2 and 35.68\n",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			r := &run{p: &printer{w: &b, quiet: tt.quiet}, out: tt.out}
			r.summary()
			got := b.String()
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("summary lacks %q:\n%s", w, got)
				}
			}
			if tt.quiet && strings.Contains(got, "Summary") {
				t.Errorf("quiet summary printed the step:\n%s", got)
			}
		})
	}
}

// The review step passes only with a ready packet of the run's one
// operation whose receipt verified offline.
func TestReviewProblems(t *testing.T) {
	ok := func() *Review { return &Review{Verdict: packet.VerdictReady, Operations: 1, Verified: true} }
	tests := []struct {
		name string
		rv   *Review
		want string // a part of the one problem; "" means none
	}{
		{"ready and verified", ok(), ""},
		{"no packet", nil, "no review packet was written"},
		{"not ready", func() *Review { r := ok(); r.Verdict = packet.VerdictNotReady; return r }(), "verdict not_ready, want 1, ready"},
		{"two operations", func() *Review { r := ok(); r.Operations = 2; return r }(), "holds 2 operation(s)"},
		{"not verified", func() *Review { r := ok(); r.Verified = false; return r }(), "did not verify offline"},
	}
	for _, tt := range tests {
		got := reviewProblems(tt.rv)
		switch {
		case tt.want == "" && len(got) != 0:
			t.Errorf("%s: problems %q, want none", tt.name, got)
		case tt.want != "" && (len(got) != 1 || !strings.Contains(got[0], tt.want)):
			t.Errorf("%s: problems %q, want one saying %q", tt.name, got, tt.want)
		}
	}
}
