package mcpserver

import (
	"fmt"
	"testing"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/policy"
)

// A form answer narrows an approval but never widens it past the route or
// the cap.
func TestFormTerms(t *testing.T) {
	usd := func(s string) money.Amount { return money.MustParse(s, "USD") }
	suite := policy.Route{RemoteJobs: 1, Estimate: usd("18.00")}
	matrix := policy.Route{RemoteJobs: 64, Estimate: usd("1141.76")}
	for _, tt := range []struct {
		ceiling  string
		jobs     int
		route    policy.Route
		cap      string
		want     string
		wantJobs int
	}{
		{"500.00", 5, suite, "100.00", "18.00", 1},
		{"5.00", 1, suite, "100.00", "5.00", 1},
		{"18.00", 1, suite, "10.00", "10.00", 1},
		{"1141.76", 64, matrix, "2000.00", "1141.76", 64},
		{"99999", 100, matrix, "500.00", "500.00", 64},
		{"100.00", 2, matrix, "2000.00", "100.00", 2},
	} {
		t.Run(fmt.Sprintf("%s/%d/cap%s", tt.ceiling, tt.jobs, tt.cap), func(t *testing.T) {
			got, jobs := formTerms(usd(tt.ceiling), tt.jobs, tt.route, usd(tt.cap))
			if got.String() != tt.want || jobs != tt.wantJobs {
				t.Errorf("formTerms = %s and %d jobs; want %s and %d", got, jobs, tt.want, tt.wantJobs)
			}
		})
	}
}

// A form covers a route only where the policy allows elicitation, sets a
// cap, and the route's whole estimate fits under it.
func TestFormCovers(t *testing.T) {
	usd := func(s string) money.Amount { return money.MustParse(s, "USD") }
	both := []ledger.ApprovalWay{ledger.ApproveByRequest, ledger.ApproveByElicitation}
	for _, tt := range []struct {
		name     string
		way      []ledger.ApprovalWay
		cap      money.Amount
		estimate money.Amount
		want     bool
	}{
		{"default: off", both, money.Zero("USD"), usd("18.00"), false},
		{"under the cap", both, usd("20.00"), usd("18.00"), true},
		{"at the cap", both, usd("18.00"), usd("18.00"), true},
		{"over the cap", both, usd("17.99"), usd("18.00"), false},
		{"another currency", both, money.MustParse("100.00", "EUR"), usd("18.00"), false},
		{"no elicitation", []ledger.ApprovalWay{ledger.ApproveByRequest}, usd("20.00"), usd("18.00"), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tool := &config.Tool{ApproveBy: tt.way, ElicitationMaxTotalCost: tt.cap}
			if got := formCovers(tool, policy.Route{RemoteJobs: 1, Estimate: tt.estimate}); got != tt.want {
				t.Errorf("formCovers = %v, want %v", got, tt.want)
			}
		})
	}
}
