package cli_test

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
)

// completed puts a finished operation of tenant in the ledger: accepted
// under an approval, one remote job bound, a final charge of 17.84.
func (l *ledgerFile) completed(t *testing.T, tenant, operationID string) *ledger.Operation {
	t.Helper()
	ctx := context.Background()
	if _, err := l.store.ApprovalCreate(ctx, &ledger.Approval{
		Tenant: tenant, OperationID: operationID, Tool: "hosted_test.run_suite", MaxTotalCost: money.MustParse("20.00", "USD"),
		MaxRemoteJobs: 1, RetryPolicy: "lookup_then_attach", ExpiresAt: time.Now().Add(time.Hour),
	}); err != nil {
		t.Fatal(err)
	}
	op := l.sending(t, l.accept(t, tenant, operationID, true))
	final := money.MustParse("17.84", "USD")
	if _, err := l.store.Transition(ctx, &ledger.TransitionParams{
		OperationRef: op.ID, From: []ledger.State{ledger.StateSending}, To: ledger.StateCompleted,
		Result: json.RawMessage(`{"content":[{"type":"text","text":"suite passed"}]}`),
		RemoteJobs: []*ledger.RemoteJobUpsert{{
			Upstream: "hosted_test", RemoteJobID: "hosted-suite-9912", Kind: "provider_job", Status: ledger.JobCompleted, Intended: new(true),
		}},
		Charges:     []*ledger.ChargeUpsert{{RemoteJobID: "hosted-suite-9912", ProviderChargeID: "ch-9912", Amount: final, Status: ledger.ChargeFinal, Source: "test"}},
		Creator:     &ledger.AttemptKnowledge{RemoteAccepted: ledger.Yes, RemoteEffect: ledger.Yes, ChargeStatus: ledger.Yes},
		Reservation: &ledger.ReservationUpdate{Status: ledger.ReservationSettled, Settled: final},
		Events: []ledger.EventParams{
			{Kind: ledger.EventRemoteJobBound, Data: map[string]string{"remote_job_id": "hosted-suite-9912"}},
			{Kind: ledger.EventResultStored, Data: map[string]string{"remote_job_id": "hosted-suite-9912"}},
		},
	}); err != nil {
		t.Fatal(err)
	}
	return l.operation(t, op)
}

func TestReceipt(t *testing.T) {
	l := newLedger(t)
	op := l.completed(t, "acme", "settlement-regression-842")

	yml := l.ok(t, "receipt", "settlement-regression-842")
	for _, want := range []string{"paid_tool_retry_receipt:\n", "  operation_id: settlement-regression-842\n", "  final_cost_usd: 17.84\n",
		"  estimated_cost_usd: 18.00\n", "  result_used: hosted-suite-9912\n", "  reconciliation_status: complete\n", "  review_status: ready\n"} {
		if !strings.Contains(yml, want) {
			t.Errorf("receipt (yaml) =\n%s\nwant %q", yml, want)
		}
	}
	if byTask := l.ok(t, "receipt", op.TaskID, "--tenant", "acme"); !strings.Contains(byTask, "final_cost_usd: 17.84") {
		t.Errorf("receipt by task ID =\n%s\nwant the same receipt", byTask)
	}

	cliJSON := receiptJSON(t, []byte(l.ok(t, "receipt", "settlement-regression-842", "--format", "json")))
	if got := cliJSON["final_cost_usd"]; got != "17.84" {
		t.Errorf("receipt (json) final_cost_usd = %#v, want the string \"17.84\"", got)
	}

	md := l.ok(t, "receipt", "settlement-regression-842", "--format", "md")
	if want := "**`settlement-regression-842`** — 1 remote job, 0 duplicates, 17.84 USD final, reconciliation complete, ready for review\n"; !strings.HasPrefix(md, want) {
		t.Errorf("receipt (md) starts %q, want the summary line %q", firstLine(md), want)
	}

	// The HTTP endpoint serves the same receipt to the operation's tenant
	// and nothing to another.
	base := l.apiServer(t)
	acme, _, err := authn.NewAPIKey(context.Background(), l.store, "acme", "")
	if err != nil {
		t.Fatal(err)
	}
	globex, _, err := authn.NewAPIKey(context.Background(), l.store, "globex", "")
	if err != nil {
		t.Fatal(err)
	}
	status, body := get(t, base+"/v1/operations/settlement-regression-842/receipt?format=json", acme)
	if status != http.StatusOK {
		t.Fatalf("GET receipt: %d %s", status, body)
	}
	httpJSON := receiptJSON(t, body)
	delete(cliJSON, "generated_at")
	delete(httpJSON, "generated_at")
	if !reflect.DeepEqual(cliJSON, httpJSON) {
		t.Errorf("HTTP receipt differs from the command line's:\nhttp %v\ncli  %v", httpJSON, cliJSON)
	}
	if status, body := get(t, base+"/v1/operations/settlement-regression-842/receipt", globex); status != http.StatusNotFound {
		t.Errorf("GET another tenant's receipt: %d %s, want 404", status, body)
	}

	checkFailure(t, l.run(t, "receipt", "no-such-operation"), `no operation "no-such-operation"`, false)
	checkFailure(t, l.run(t, "receipt", "settlement-regression-842", "--tenant", "globex"), `no operation "settlement-regression-842" for tenant "globex"`, false)
	checkFailure(t, l.run(t, "receipt", "settlement-regression-842", "--format", "pdf"), `--format "pdf" is not a receipt format`, true)
}

// receiptJSON returns the receipt inside a JSON rendering.
func receiptJSON(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var doc map[string]map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("receipt JSON %s: %v", b, err)
	}
	r, ok := doc["paid_tool_retry_receipt"]
	if !ok {
		t.Fatalf("receipt JSON %s has no paid_tool_retry_receipt", b)
	}
	return r
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
