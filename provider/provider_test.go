package provider_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/provider"
	"github.com/taskgate/taskgate/sim/providersim"
)

func dur(d time.Duration) *time.Duration { return &d }

func TestDecide(t *testing.T) {
	tests := []struct {
		name      string
		lookup    provider.LookupResult
		policy    ledger.RetryPolicy
		safeAfter *time.Duration
		sinceSend time.Duration
		want      provider.Decision
	}{
		{"not_found without a safe-after contract", provider.LookupResult{Answer: provider.NotFound}, ledger.RetryLookupThenAttach, nil, time.Hour,
			provider.Decision{Action: provider.ActionRequireReview, Reason: ledger.ReasonLookupNotFoundUnsafe}},
		{"not_found before the safe delay", provider.LookupResult{Answer: provider.NotFound}, ledger.RetryLookupThenAttach, dur(30 * time.Second), 10 * time.Second,
			provider.Decision{Action: provider.ActionWait, RetryAfter: 20 * time.Second}},
		{"not_found after the safe delay", provider.LookupResult{Answer: provider.NotFound}, ledger.RetryLookupThenAttach, dur(30 * time.Second), 31 * time.Second,
			provider.Decision{Action: provider.ActionResend}},
		{"not_found under no_automatic_resend", provider.LookupResult{Answer: provider.NotFound}, ledger.RetryNoAutomaticResend, dur(0), time.Hour,
			provider.Decision{Action: provider.ActionRequireReview, Reason: ledger.ReasonNoAutomaticResend}},
		{"accepted", provider.LookupResult{Answer: provider.Accepted, RemoteJobID: "job-7"}, ledger.RetryLookupThenAttach, nil, 0, provider.Decision{Action: provider.ActionAttach}},
		{"running", provider.LookupResult{Answer: provider.Running, RemoteJobID: "job-7"}, ledger.RetryLookupThenAttach, nil, 0, provider.Decision{Action: provider.ActionAttach}},
		{"completed", provider.LookupResult{Answer: provider.Completed, RemoteJobID: "job-7"}, ledger.RetryLookupThenAttach, nil, 0, provider.Decision{Action: provider.ActionFetch}},
		{"failed", provider.LookupResult{Answer: provider.Failed, RemoteJobID: "job-7"}, ledger.RetryLookupThenAttach, nil, 0, provider.Decision{Action: provider.ActionRecordFailure}},
		{"cancelled", provider.LookupResult{Answer: provider.Cancelled, RemoteJobID: "job-7"}, ledger.RetryLookupThenAttach, nil, 0, provider.Decision{Action: provider.ActionRecordFailure}},
		{"accepted without a job ID", provider.LookupResult{Answer: provider.Accepted}, ledger.RetryLookupThenAttach, nil, 0,
			provider.Decision{Action: provider.ActionRequireReview, Reason: ledger.ReasonLookupIndeterminate}},
		{"running without a job ID", provider.LookupResult{Answer: provider.Running}, ledger.RetryLookupThenAttach, nil, 0,
			provider.Decision{Action: provider.ActionRequireReview, Reason: ledger.ReasonLookupIndeterminate}},
		{"completed without a job ID", provider.LookupResult{Answer: provider.Completed}, ledger.RetryLookupThenAttach, nil, 0,
			provider.Decision{Action: provider.ActionRequireReview, Reason: ledger.ReasonLookupIndeterminate}},
		{"failed without a job ID", provider.LookupResult{Answer: provider.Failed}, ledger.RetryLookupThenAttach, nil, 0,
			provider.Decision{Action: provider.ActionRequireReview, Reason: ledger.ReasonLookupIndeterminate}},
		{"cancelled without a job ID", provider.LookupResult{Answer: provider.Cancelled}, ledger.RetryLookupThenAttach, nil, 0,
			provider.Decision{Action: provider.ActionRequireReview, Reason: ledger.ReasonLookupIndeterminate}},
		{"indeterminate", provider.LookupResult{Answer: provider.Indeterminate}, ledger.RetryLookupThenAttach, dur(0), time.Hour,
			provider.Decision{Action: provider.ActionRequireReview, Reason: ledger.ReasonLookupIndeterminate}},
		{"lookup error", provider.LookupResult{Answer: provider.Indeterminate, CallFailed: true}, ledger.RetryLookupThenAttach, dur(0), time.Hour,
			provider.Decision{Action: provider.ActionRequireReview, Reason: ledger.ReasonLookupFailed}},
	}
	for _, tt := range tests {
		if got := provider.Decide(&tt.lookup, 1, tt.policy, tt.safeAfter, tt.sinceSend); got != tt.want {
			t.Errorf("%s: Decide = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// session is a provider.Caller over a real MCP session.
type session struct{ cs *mcp.ClientSession }

func (s session) CallTool(ctx context.Context, name string, args map[string]any) (*mcp.CallToolResult, error) {
	return s.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
}

func connect(t *testing.T, sim *providersim.Sim) session {
	t.Helper()
	return connectServer(t, sim.Server())
}

// connectServer connects a client session to server over in-memory
// transports, both closed when the test ends.
func connectServer(t *testing.T, server *mcp.Server) session {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return session{cs}
}

func example(t *testing.T) *config.Tool {
	t.Helper()
	return exampleTool(t, "run_suite")
}

func exampleTool(t *testing.T, name string) *config.Tool {
	t.Helper()
	// The example names the provider's credential by an environment
	// variable; the simulated provider needs none.
	t.Setenv("HOSTED_TEST_TOKEN", "")
	c, err := config.Load("../config/taskgate.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return c.Upstreams[0].Tools[name]
}

// The example's run_matrix contract against the simulator: the route is
// priced per runner, the result lists every runner, the lookup finds them
// all, and each runner's charges are read with their kinds, a nested
// service's among them.
func TestFanOutContractAgainstProviderSim(t *testing.T) {
	sim := providersim.New(&providersim.Options{JobDuration: 30 * time.Millisecond})
	t.Cleanup(func() { sim.Close() })
	s := connect(t, sim)
	tool := exampleTool(t, "run_matrix")
	c := provider.New("hosted_test", "run_matrix", tool)
	ctx := context.Background()
	args := json.RawMessage(`{"suite":"settlement","runners":4,"browser_grid":true}`)

	r, err := c.Route(ctx, s, args)
	if err != nil || r.RemoteJobs != 4 || r.Estimate.String() != "72.00" {
		t.Fatalf("route = %+v, %v; want 4 remote jobs at 72.00 (18.00 each)", r, err)
	}
	send, err := c.PrepareSend(args, "op-m")
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.CallTool(ctx, "run_matrix", send.Arguments)
	if err != nil || res.IsError {
		t.Fatalf("run_matrix: %v %v", res, err)
	}
	ids := c.RemoteJobIDs(res)
	if len(ids) != 4 {
		t.Fatalf("remote jobs from the result = %v, want 4", ids)
	}
	if l := c.Lookup(ctx, s, "op-m", args); l.Answer != provider.Completed || len(l.Jobs) != 4 || l.Jobs[3].ID != ids[3] {
		t.Fatalf("lookup = %+v, want the 4 runners", l)
	}
	kinds := map[string]int{}
	for _, id := range ids {
		list, err := c.Charges(ctx, s, id, "op-m", args)
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range list.Charges {
			if ch.RemoteJobID != id || ch.Status != ledger.ChargeFinal {
				t.Errorf("charge %+v of runner %s, want a final charge of it", ch, id)
			}
			kinds[ch.Kind]++
		}
	}
	if kinds["runner"] != 4 || kinds["browser_grid"] != 4 {
		t.Errorf("charge kinds = %v, want 4 runner and 4 browser_grid", kinds)
	}

	// The estimate tool can price the route and count its jobs instead.
	tool.Contract.Cost = config.Cost{Currency: "USD", EstimateTool: &config.EstimateTool{
		Call: config.Call{Tool: "estimate_matrix"}, Field: "estimate_usd", JobsField: "runners"}}
	if r, err := provider.New("hosted_test", "run_matrix", tool).Route(ctx, s, args); err != nil || r.RemoteJobs != 4 || r.Estimate.String() != "80.00" {
		t.Fatalf("route by estimate_matrix = %+v, %v; want 4 remote jobs at 80.00 (with the browser grid)", r, err)
	}
}

func TestContractAgainstProviderSim(t *testing.T) {
	sim := providersim.New(&providersim.Options{JobDuration: 30 * time.Millisecond})
	t.Cleanup(func() { sim.Close() })
	s := connect(t, sim)
	c := provider.New("hosted_test", "run_suite", example(t))
	ctx := context.Background()
	args := json.RawMessage(`{"suite":"settlement"}`)

	if l := c.Lookup(ctx, s, "op-1", args); l.Answer != provider.NotFound {
		t.Fatalf("lookup before any send = %+v, want not_found", l)
	}
	send, err := c.PrepareSend(args, "op-1")
	if err != nil || send.Arguments["idempotency_key"] != "op-1" || send.Arguments["suite"] != "settlement" {
		t.Fatalf("PrepareSend = %+v, %v", send, err)
	}
	res, err := s.CallTool(ctx, "run_suite", send.Arguments)
	if err != nil || res.IsError {
		t.Fatalf("run_suite: %v %v", res, err)
	}
	job := c.RemoteJobID(res)
	if !strings.HasPrefix(job, "hosted-suite-") {
		t.Fatalf("job ID from result = %q", job)
	}
	l := c.Lookup(ctx, s, "op-1", args)
	if l.Answer != provider.Completed || l.RemoteJobID != job || len(l.Jobs) != 1 {
		t.Fatalf("lookup after completion = %+v", l)
	}
	f, err := c.Fetch(ctx, s, job, "op-1", args)
	if err == nil && (f.Tool != "get_job" || !strings.Contains(string(f.Record), `"job_id":"`+job+`"`)) {
		t.Errorf("the fetch's record = %s from %q, want get_job's answer naming %s", f.Record, f.Tool, job)
	}
	if err != nil || f.Answer != provider.Completed || c.RemoteJobID(f.Result) != job {
		t.Fatalf("fetch = %+v, %v", f, err)
	}
	list, err := c.Charges(ctx, s, job, "op-1", args)
	var charges []provider.Charge
	if list != nil {
		charges = list.Charges
	}
	if err == nil && (list.Tool != "list_charges" || !strings.Contains(string(list.Record), `"charge_id"`)) {
		t.Errorf("the charges' record = %s from %q, want list_charges's answer", list.Record, list.Tool)
	}
	if err != nil || len(charges) != 1 || charges[0].Amount.String() != "17.84" || charges[0].Status != ledger.ChargeFinal || charges[0].RemoteJobID != job {
		t.Fatalf("charges = %+v, %v", charges, err)
	}
	cancel, err := c.Cancel(ctx, s, job, "op-1", args)
	if err != nil || cancel.EffectReversed != ledger.No {
		t.Fatalf("cancel after the effect = %+v, %v", cancel, err)
	}
	if r, err := c.Route(ctx, s, args); err != nil || r.Estimate.String() != "18.00" || r.RemoteJobs != 1 {
		t.Fatalf("route = %+v, %v; want one remote job estimated at 18.00", r, err)
	}
}

// A call that fans out ends when all its jobs have: whatever its first
// job's answer, a lookup that names jobs attaches to follow every one.
func TestDecideFanOut(t *testing.T) {
	tests := []struct {
		lookup provider.LookupResult
		want   provider.Decision
	}{
		{provider.LookupResult{Answer: provider.Running, RemoteJobID: "job-7"}, provider.Decision{Action: provider.ActionAttach}},
		{provider.LookupResult{Answer: provider.Completed, RemoteJobID: "job-7"}, provider.Decision{Action: provider.ActionAttach}},
		{provider.LookupResult{Answer: provider.Failed, RemoteJobID: "job-7"}, provider.Decision{Action: provider.ActionAttach}},
		{provider.LookupResult{Answer: provider.Cancelled, RemoteJobID: "job-7"}, provider.Decision{Action: provider.ActionAttach}},
		{provider.LookupResult{Answer: provider.Running}, provider.Decision{Action: provider.ActionRequireReview, Reason: ledger.ReasonLookupIndeterminate}},
		{provider.LookupResult{Answer: provider.NotFound}, provider.Decision{Action: provider.ActionRequireReview, Reason: ledger.ReasonLookupNotFoundUnsafe}},
		{provider.LookupResult{Answer: provider.Indeterminate}, provider.Decision{Action: provider.ActionRequireReview, Reason: ledger.ReasonLookupIndeterminate}},
	}
	for _, tt := range tests {
		if got := provider.Decide(&tt.lookup, 4, ledger.RetryLookupThenAttach, nil, time.Hour); got != tt.want {
			t.Errorf("a fan-out of 4, lookup %+v: Decide = %+v, want %+v", tt.lookup, got, tt.want)
		}
	}
}

func TestLookupFaults(t *testing.T) {
	sim := providersim.New(&providersim.Options{JobDuration: 30 * time.Millisecond})
	t.Cleanup(func() { sim.Close() })
	s := connect(t, sim)
	c := provider.New("hosted_test", "run_suite", example(t))
	ctx := context.Background()
	if _, err := s.CallTool(ctx, "run_suite", map[string]any{"suite": "a", "idempotency_key": "op-1"}); err != nil {
		t.Fatal(err)
	}
	faults, err := providersim.ParseFaults("lookup_indeterminate")
	if err != nil {
		t.Fatal(err)
	}
	sim.SetFaults(faults)
	l := c.Lookup(ctx, s, "op-1", nil)
	if l.Answer != provider.Indeterminate || l.Detail == "" {
		t.Fatalf("lookup with a broken index = %+v, want indeterminate with a detail", l)
	}
	if d := provider.Decide(l, 1, ledger.RetryLookupThenAttach, nil, time.Hour); d.Action != provider.ActionRequireReview {
		t.Fatalf("decision = %+v, want require_review", d)
	}
}

func TestEstimateTool(t *testing.T) {
	sim := providersim.New(&providersim.Options{JobDuration: 30 * time.Millisecond})
	t.Cleanup(func() { sim.Close() })
	s := connect(t, sim)
	tool := example(t)
	tool.Contract.Cost.Estimate = nil
	tool.Contract.Cost.EstimateTool = &config.EstimateTool{Call: config.Call{Tool: "estimate_suite", Arguments: map[string]any{"suite": "{argument:suite}"}}, Field: "estimate_usd"}
	c := provider.New("hosted_test", "run_suite", tool)
	r, err := c.Route(context.Background(), s, json.RawMessage(`{"suite":"x"}`))
	if err != nil || r.Estimate.String() != "18.00" || r.Estimate.Currency != "USD" || r.RemoteJobs != 1 {
		t.Fatalf("route via the estimate tool = %+v, %v", r, err)
	}
}

// numberProvider is a real MCP server whose charges and estimate are JSON
// numbers, as some providers write them.
func numberProvider(t *testing.T, amount, estimate json.RawMessage) session {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "numbers", Version: "1.0.0"}, nil)
	object := json.RawMessage(`{"type":"object"}`)
	answer := func(body string) mcp.ToolHandler {
		return func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: body}}}, nil
		}
	}
	server.AddTool(&mcp.Tool{Name: "list_charges", InputSchema: object},
		answer(`{"charges":[{"charge_id":"ch-1","amount":`+string(amount)+`,"status":"final"}]}`))
	server.AddTool(&mcp.Tool{Name: "estimate", InputSchema: object}, answer(`{"estimate":`+string(estimate)+`}`))
	return connectServer(t, server)
}

// Amounts that arrive as JSON numbers are read as the decimals they are,
// not through a float's exponent form.
func TestAmountsAsJSONNumbers(t *testing.T) {
	tests := []struct {
		number json.RawMessage
		want   string // "" means refused
	}{
		{json.RawMessage(`17.84`), "17.84"},
		{json.RawMessage(`20000000`), "20000000.00"},
		{json.RawMessage(`0.00001`), "0.00001"},
		{json.RawMessage(`1e-7`), ""},
	}
	for _, tt := range tests {
		s := numberProvider(t, tt.number, tt.number)
		tool := &config.Tool{Consequential: true, Contract: config.Contract{
			Charges: &config.Charges{Call: config.Call{Tool: "list_charges"}, ListField: "charges", IDField: "charge_id", AmountField: "amount", StatusField: "status"},
			Cost:    config.Cost{Currency: "USD", EstimateTool: &config.EstimateTool{Call: config.Call{Tool: "estimate", Arguments: map[string]any{"x": 1}}, Field: "estimate"}},
		}}
		c := provider.New("numbers", "run", tool)
		ctx := context.Background()
		list, err := c.Charges(ctx, s, "job-1", "op-1", nil)
		var charges []provider.Charge
		if list != nil {
			charges = list.Charges
		}
		r, estErr := c.Route(ctx, s, nil)
		est := r.Estimate
		if tt.want == "" {
			if err == nil || estErr == nil {
				t.Errorf("amount %s: charges %+v, %v and estimate %v, %v; want both refused", tt.number, charges, err, est, estErr)
			}
			continue
		}
		if err != nil || len(charges) != 1 || charges[0].Amount.String() != tt.want {
			t.Errorf("amount %s: charges = %+v, %v; want one of %s", tt.number, charges, err, tt.want)
		}
		if estErr != nil || est.String() != tt.want {
			t.Errorf("amount %s: estimate = %v, %v; want %s", tt.number, est, estErr, tt.want)
		}
	}
}
