package provider

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/money"
)

// The route of a call: how many remote jobs it starts and what they are
// estimated to cost in all, from the contract's cost and the call.
func TestRoute(t *testing.T) {
	usd := func(s string) *money.Amount { a := money.MustParse(s, "USD"); return &a }
	tool := func(field, jobs string) *config.EstimateTool {
		return &config.EstimateTool{Call: config.Call{Tool: "estimate_matrix"}, Field: field, JobsField: jobs}
	}
	tests := []struct {
		name     string
		cost     config.Cost
		args     string
		answer   map[string]any
		jobs     int
		estimate string
		err      string // a part of the error; "" means none
	}{
		{"no cost", config.Cost{}, `{}`, nil, 1, "0.00", ""},
		{"a fixed estimate", config.Cost{Estimate: usd("18.00")}, `{"suite":"x"}`, nil, 1, "18.00", ""},
		{"an estimate tool", config.Cost{EstimateTool: tool("estimate_usd", "")}, `{}`, map[string]any{"estimate_usd": "17.50"}, 1, "17.50", ""},
		{"a price per job times the argument", config.Cost{EstimatePerJob: usd("18.00"), JobsArgument: "runners"}, `{"runners":4}`, nil, 4, "72.00", ""},
		{"a fixed total for a counted route", config.Cost{Estimate: usd("50.00"), JobsArgument: "runners"}, `{"runners":4}`, nil, 4, "50.00", ""},
		{"the estimate tool counts the jobs", config.Cost{EstimateTool: tool("estimate_usd", "runners")}, `{"runners":6}`, map[string]any{"estimate_usd": "108.00", "runners": float64(6)}, 6, "108.00", ""},
		{"the estimate tool prices, the argument counts", config.Cost{EstimateTool: tool("total.usd", ""), JobsArgument: "n"}, `{"n":3}`, map[string]any{"total": map[string]any{"usd": 40.5}}, 3, "40.50", ""},
		{"no count in the arguments", config.Cost{EstimatePerJob: usd("1.00"), JobsArgument: "runners"}, `{}`, nil, 0, "", `argument "runners" counts the remote jobs this call starts: it is missing`},
		{"a count of zero", config.Cost{EstimatePerJob: usd("1.00"), JobsArgument: "runners"}, `{"runners":0}`, nil, 0, "", "a whole number of at least 1, not 0"},
		{"a fractional count", config.Cost{EstimatePerJob: usd("1.00"), JobsArgument: "runners"}, `{"runners":2.5}`, nil, 0, "", "a whole number of at least 1, not 2.5"},
		{"a count as text", config.Cost{EstimatePerJob: usd("1.00"), JobsArgument: "runners"}, `{"runners":"4"}`, nil, 0, "", `it is a string ("4"), not a number`},
		{"the estimate tool names no count", config.Cost{EstimateTool: tool("estimate_usd", "runners")}, `{}`, map[string]any{"estimate_usd": "1.00"}, 0, "", `its answer's "runners" counts the remote jobs`},
		{"the estimate tool names no estimate", config.Cost{EstimateTool: tool("estimate_usd", "")}, `{}`, map[string]any{}, 0, "", `its answer has no "estimate_usd"`},
		{"a total out of range", config.Cost{EstimatePerJob: &money.Amount{Micros: 1 << 62, Currency: "USD"}, JobsArgument: "runners"}, `{"runners":4}`, nil, 0, "", "price 4 remote jobs"},
	}
	for _, tt := range tests {
		tt.cost.Currency = "USD"
		var args map[string]any
		dec := json.NewDecoder(strings.NewReader(tt.args))
		dec.UseNumber()
		if err := dec.Decode(&args); err != nil {
			t.Fatal(err)
		}
		r, err := route(&tt.cost, args, tt.answer)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: route = %+v, %v; want an error saying %q", tt.name, r, err, tt.err)
			}
			continue
		}
		if err != nil || r.RemoteJobs != tt.jobs || r.Estimate.String() != tt.estimate || r.Estimate.Currency != "USD" {
			t.Errorf("%s: route = %d jobs, %s %s, %v; want %d jobs, %s USD", tt.name, r.RemoteJobs, r.Estimate, r.Estimate.Currency, err, tt.jobs, tt.estimate)
		}
	}
}

// Without a fetch tool a job's status comes from the lookup: its own entry
// when the lookup lists it, never the first job's answer for another.
func TestLookupAnswerFor(t *testing.T) {
	listed := &LookupResult{Answer: Completed, RemoteJobID: "a", Jobs: []JobRef{{ID: "a", Answer: Completed}, {ID: "b", Answer: Failed}}}
	tests := []struct {
		l    *LookupResult
		job  string
		want Answer
	}{
		{listed, "a", Completed},
		{listed, "b", Failed},
		{listed, "task-7", Completed}, // known to the provider by another name
		{&LookupResult{Answer: Running, RemoteJobID: "a"}, "a", Running},
	}
	for _, tt := range tests {
		if got := tt.l.answerFor(tt.job); got != tt.want {
			t.Errorf("answerFor(%q) over %+v = %q, want %q", tt.job, tt.l.Jobs, got, tt.want)
		}
	}
}
