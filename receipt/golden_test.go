package receipt_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"go.yaml.in/yaml/v3"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/receipt"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata from the current renderings")

// t0 is when every golden operation was accepted.
var t0 = time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func usd(s string) money.Amount { return money.MustParse(s, "USD") }

func event(id int64, kind ledger.EventKind, when time.Duration, data string) *ledger.Event {
	return &ledger.Event{ID: id, OperationRef: 42, Kind: kind, Data: json.RawMessage(data), CreatedAt: at(when)}
}

// clean is the example receipt of docs/operations.md: the client of the first attempt
// disconnected, its retry attached to the same operation, one remote job
// ran and was charged once.
func clean() *receipt.Input {
	return &receipt.Input{
		Operation: &ledger.Operation{
			ID: 42, Tenant: "acme", OperationID: "settlement-regression-842", TaskID: "task-7q3mzx2kd4hb6yfa",
			Upstream: "hosted_test", Tool: "run_suite", Fingerprint: "sha256:4c1f", State: ledger.StateCompleted,
			ApprovalID: 7, RetryPolicy: "lookup_then_attach", Estimate: usd("18.00"), IntendedRemoteJobs: 1, SendCount: 1,
			CreatedAt: t0, UpdatedAt: at(6 * time.Minute), EndedAt: at(6 * time.Minute),
		},
		Attempts: []*ledger.Attempt{
			{
				ID: 101, RequestID: "req-first", Tenant: "acme", OperationID: "settlement-regression-842", OperationRef: 42,
				Decision: ledger.DecisionCreated, Source: "mcp/2026-07-28", ClientResult: ledger.ClientDisconnected,
				RemoteAccepted: ledger.Yes, RemoteEffect: ledger.Yes, ChargeStatus: ledger.Yes,
				CreatedAt: t0, UpdatedAt: at(30 * time.Second),
			},
			{
				ID: 102, RequestID: "req-retry", Tenant: "acme", OperationID: "settlement-regression-842", OperationRef: 42,
				Decision: ledger.DecisionAttached, Source: "mcp/2026-07-28", ClientResult: ledger.ClientDelivered,
				RemoteAccepted: ledger.Yes, RemoteEffect: ledger.Yes, ChargeStatus: ledger.Yes,
				CreatedAt: at(2 * time.Minute), UpdatedAt: at(6 * time.Minute),
			},
		},
		RemoteJobs: []*ledger.RemoteJob{{
			ID: 201, OperationRef: 42, AttemptRef: 101, Upstream: "hosted_test", Endpoint: "https://suite.example.test/mcp",
			RemoteJobID: "hosted-suite-9912", Kind: "provider_job", Status: ledger.JobCompleted, Intended: true,
			EffectReversed: ledger.Unknown, CreatedAt: at(10 * time.Second), UpdatedAt: at(6 * time.Minute),
		}},
		Charges: []*ledger.Charge{{
			ID: 301, OperationRef: 42, RemoteJobRef: 201, ProviderChargeID: "ch-9912-1", Amount: usd("17.84"),
			Status: ledger.ChargeFinal, Source: "provider", CreatedAt: at(7 * time.Minute), UpdatedAt: at(7 * time.Minute),
		}},
		Approval: &ledger.Approval{
			ID: 7, Tenant: "acme", OperationID: "settlement-regression-842", Tool: "run_suite",
			MaxTotalCost: usd("20.00"), MaxRemoteJobs: 1, RetryPolicy: "lookup_then_attach",
			ExpiresAt: at(24 * time.Hour), CreatedAt: at(-time.Hour), CreatedBy: "dana",
		},
		Reservations: []*ledger.Reservation{{
			ID: 401, ApprovalRef: 7, OperationRef: 42, Amount: usd("18.00"), Settled: usd("17.84"), RemoteJobs: 1,
			Status: ledger.ReservationSettled, CreatedAt: t0, UpdatedAt: at(7 * time.Minute),
		}},
		Events: []*ledger.Event{
			event(2, ledger.EventSendStarted, 5*time.Second, `{}`),
			event(3, ledger.EventRemoteJobBound, 10*time.Second, `{"remote_job_id":"hosted-suite-9912"}`),
			event(4, ledger.EventClientStoppedWatching, 30*time.Second, `{"request_id":"req-first","client_result":"disconnected"}`),
			event(6, ledger.EventRemoteJobObserved, 6*time.Minute, `{"remote_job_id":"hosted-suite-9912","status":"completed"}`),
			event(7, ledger.EventResultStored, 6*time.Minute, `{}`),
			event(8, ledger.EventChargeRecorded, 7*time.Minute, `{"charge_id":"ch-9912-1","status":"final"}`),
			event(9, ledger.EventReconciled, 8*time.Minute, `{"lookup":"answered","detail":"1 remote job, 1 charge"}`),
		},
		Priced: true,
		Now:    at(10 * time.Minute),
	}
}

// duplicate: a second remote job for the same operation, charged too.
func duplicate() *receipt.Input {
	in := clean()
	in.Operation.SendCount = 2
	in.Operation.CostBreach = true
	in.RemoteJobs = append(in.RemoteJobs, &ledger.RemoteJob{
		ID: 202, OperationRef: 42, AttemptRef: 102, Upstream: "hosted_test", Endpoint: "https://suite.example.test/mcp",
		RemoteJobID: "hosted-suite-9913", Kind: "provider_job", Status: ledger.JobCompleted, Duplicate: true,
		EffectReversed: ledger.Unknown, CreatedAt: at(2*time.Minute + 5*time.Second), UpdatedAt: at(7 * time.Minute),
	})
	in.Charges = append(in.Charges, &ledger.Charge{
		ID: 302, OperationRef: 42, RemoteJobRef: 202, ProviderChargeID: "ch-9913-1", Amount: usd("17.84"),
		Status: ledger.ChargeFinal, Source: "provider", CreatedAt: at(7*time.Minute + 30*time.Second),
	})
	in.Reservations[0].Settled = usd("35.68")
	in.Events = append(in.Events[:6],
		event(10, ledger.EventDuplicateJob, 7*time.Minute+10*time.Second, `{"remote_job_id":"hosted-suite-9913"}`),
		event(11, ledger.EventCostBoundaryBreach, 7*time.Minute+30*time.Second, `{"charge_id":"ch-9913-1"}`),
		event(12, ledger.EventReconciled, 8*time.Minute, `{"lookup":"answered","detail":"2 remote jobs, 2 charges"}`),
	)
	return in
}

// missingInvoice: the job completed but the provider has not invoiced it.
func missingInvoice() *receipt.Input {
	in := clean()
	in.Charges = nil
	in.Reservations[0].Status = ledger.ReservationHeld
	in.Reservations[0].Settled = money.Amount{}
	in.Events = append(in.Events[:5],
		event(9, ledger.EventReconciled, 8*time.Minute, `{"lookup":"answered","detail":"1 remote job, no charge yet"}`))
	in.Owner = "billing-oncall"
	return in
}

// indeterminate: the gateway crashed after sending and the provider lookup
// that followed failed, so nothing is known and nothing is re-sent.
func indeterminate() *receipt.Input {
	in := clean()
	in.Operation.State = ledger.StateReview
	in.Operation.ReviewReason = "provider lookup timed out after the gateway restarted mid-send; nothing was re-sent"
	in.Operation.EndedAt = time.Time{}
	in.Attempts[0].ClientResult = ledger.ClientTimedOut
	in.Attempts[0].RemoteAccepted, in.Attempts[0].RemoteEffect, in.Attempts[0].ChargeStatus = ledger.Unknown, ledger.Unknown, ledger.Unknown
	in.Attempts[1].RemoteAccepted, in.Attempts[1].RemoteEffect, in.Attempts[1].ChargeStatus = ledger.Unknown, ledger.Unknown, ledger.Unknown
	in.RemoteJobs, in.Charges = nil, nil
	in.Reservations[0].Status = ledger.ReservationHeld
	in.Reservations[0].Settled = money.Amount{}
	in.Events = []*ledger.Event{
		event(2, ledger.EventSendStarted, 5*time.Second, `{}`),
		event(4, ledger.EventClientStoppedWatching, 30*time.Second, `{"request_id":"req-first","client_result":"timed_out"}`),
		event(6, ledger.EventLookup, 3*time.Minute, `{"answer":"indeterminate"}`),
		event(7, ledger.EventRequireReview, 3*time.Minute, `{"reason":"provider_lookup_indeterminate"}`),
		event(8, ledger.EventReconciled, 8*time.Minute, `{"lookup":"indeterminate","detail":"lookup of settlement-regression-842 timed out after 10s"}`),
	}
	return in
}

// costBreach: the provider charged more than the approved ceiling.
func costBreach() *receipt.Input {
	in := clean()
	in.Operation.CostBreach = true
	in.Charges[0].Amount = usd("23.10")
	in.Reservations[0].Settled = usd("23.10")
	in.Events = append(in.Events[:6],
		event(10, ledger.EventCostBoundaryBreach, 7*time.Minute, `{"charge_id":"ch-9912-1","final_cost_usd":"23.10","ceiling_usd":"20.00"}`),
		event(11, ledger.EventReconciled, 8*time.Minute, `{"lookup":"answered","detail":"1 remote job, 1 charge"}`),
	)
	return in
}

// cancelAfterEffect: the user asked to cancel after the job had completed;
// the provider could not reverse it.
func cancelAfterEffect() *receipt.Input {
	in := clean()
	in.Attempts = in.Attempts[:1]
	in.Attempts[0].ClientResult = ledger.ClientTimedOut
	in.Operation.CancelRequestedAt = at(7 * time.Minute)
	in.RemoteJobs[0].UpdatedAt = at(8 * time.Minute)
	in.RemoteJobs[0].CancelRequestedAt = at(7 * time.Minute)
	in.RemoteJobs[0].EffectReversed = ledger.No
	in.Charges[0].CreatedAt = at(6*time.Minute + 30*time.Second)
	in.Events = []*ledger.Event{
		event(2, ledger.EventSendStarted, 5*time.Second, `{}`),
		event(3, ledger.EventRemoteJobBound, 10*time.Second, `{"remote_job_id":"hosted-suite-9912"}`),
		event(4, ledger.EventClientStoppedWatching, 30*time.Second, `{"request_id":"req-first","client_result":"timed_out"}`),
		event(6, ledger.EventRemoteJobObserved, 5*time.Minute, `{"remote_job_id":"hosted-suite-9912","status":"completed"}`),
		event(7, ledger.EventResultStored, 5*time.Minute, `{}`),
		event(8, ledger.EventChargeRecorded, 6*time.Minute+30*time.Second, `{"charge_id":"ch-9912-1","status":"final"}`),
		event(9, ledger.EventCancellationRequested, 7*time.Minute, `{"by":"dana"}`),
		event(10, ledger.EventCancelSent, 7*time.Minute, `{"remote_job_id":"hosted-suite-9912"}`),
		event(11, ledger.EventEffectNotReversed, 8*time.Minute, `{"remote_job_id":"hosted-suite-9912","detail":"job already completed"}`),
		event(12, ledger.EventReconciled, 9*time.Minute, `{"lookup":"answered","detail":"1 remote job, 1 charge"}`),
	}
	return in
}

// approvedOnRequest: a client that cannot take a task was refused
// approval_required; an approver approved the approval request its
// refusal named, with a note, and the client's retry ran the operation.
func approvedOnRequest() *receipt.Input {
	in := clean()
	in.Operation.CreatedAt = at(2 * time.Minute)
	in.Attempts = []*ledger.Attempt{
		{
			ID: 100, RequestID: "req-refused", Tenant: "acme", OperationID: "settlement-regression-842",
			Decision: ledger.DecisionDenied, Reason: ledger.ReasonApprovalRequired, Source: "mcp/2025-03-26", ClientResult: ledger.ClientUnknown,
			RemoteAccepted: ledger.No, RemoteEffect: ledger.No, ChargeStatus: ledger.No, CreatedAt: t0, UpdatedAt: t0,
		},
		in.Attempts[1],
	}
	in.Attempts[1].Decision = ledger.DecisionCreated
	in.RemoteJobs[0].AttemptRef = 102
	in.Events = slices.DeleteFunc(in.Events, func(e *ledger.Event) bool { return e.Kind == ledger.EventClientStoppedWatching })
	in.Approval.CreatedBy, in.Approval.CreatedAt = "api_key:9", at(time.Minute)
	in.ApprovalRequest = &ledger.ApprovalRequest{
		ID: 12, Tenant: "acme", OperationID: "settlement-regression-842", Tool: "hosted_test.run_suite", Fingerprint: "sha256:4c1f",
		Estimate: usd("18.00"), RemoteJobs: 1, RequestedBy: "api_key:3", Status: ledger.RequestApproved,
		CreatedAt: t0, ExpiresAt: at(time.Hour), DecidedAt: at(time.Minute), DecidedBy: "api_key:9",
		Note: "checked with finance", ApprovalRef: 7,
	}
	return in
}

// cancelKept is clean's operation, whose client asked to cancel while its
// job ran: the tool's policy (client_cancel: before_send) kept the job,
// which ran to its end and was reconciled.
func cancelKept() *receipt.Input {
	in := clean()
	in.Attempts = in.Attempts[:1]
	in.Attempts[0].ClientResult = ledger.ClientDelivered
	in.Events = []*ledger.Event{
		event(2, ledger.EventSendStarted, 5*time.Second, `{}`),
		event(3, ledger.EventRemoteJobBound, 10*time.Second, `{"remote_job_id":"hosted-suite-9912"}`),
		event(4, ledger.EventCancellationRequested, 2*time.Minute, `{"after_effect":false,"era":"2026-07-28","state":"running","kept_by":"before_send"}`),
		event(6, ledger.EventRemoteJobObserved, 5*time.Minute, `{"remote_job_id":"hosted-suite-9912","status":"completed"}`),
		event(7, ledger.EventResultStored, 5*time.Minute, `{}`),
		event(8, ledger.EventChargeRecorded, 7*time.Minute, `{"charge_id":"ch-9912-1","status":"final"}`),
		event(12, ledger.EventReconciled, 9*time.Minute, `{"lookup":"answered","detail":"1 remote job, 1 charge"}`),
	}
	return in
}

type goldenCase struct {
	name           string
	input          func() *receipt.Input
	reconciliation receipt.ReconciliationStatus
	review         receipt.ReviewStatus
	duplicates     int
	final          string
	breaches       int
	// actions are the next actions as "action target", in order.
	actions []string
}

var goldenCases = []goldenCase{
	{
		name: "clean", input: clean,
		reconciliation: receipt.ReconciliationComplete, review: receipt.ReviewReady, final: "17.84",
		actions: []string{},
	},
	{
		name: "duplicate", input: duplicate,
		reconciliation: receipt.ReconciliationComplete, review: receipt.ReviewBlocked, duplicates: 1, final: "35.68", breaches: 1,
		actions: []string{
			"cancel_duplicate hosted-suite-9913",
			"request_refund ch-9913-1",
			"preserve_evidence settlement-regression-842",
		},
	},
	{
		name: "missing_invoice", input: missingInvoice,
		reconciliation: receipt.ReconciliationIncomplete, review: receipt.ReviewNeedsReview, final: "0.00",
		actions: []string{"check_late_invoice hosted-suite-9912"},
	},
	{
		name: "indeterminate", input: indeterminate,
		reconciliation: receipt.ReconciliationIndeterminate, review: receipt.ReviewNeedsReview, final: "0.00",
		actions: []string{
			"preserve_evidence settlement-regression-842",
			"reconcile_again settlement-regression-842",
			"resolve_review settlement-regression-842",
		},
	},
	{
		name: "cost_breach", input: costBreach,
		reconciliation: receipt.ReconciliationComplete, review: receipt.ReviewNeedsReview, final: "23.10", breaches: 1,
		actions: []string{
			"request_refund ch-9912-1",
			"preserve_evidence settlement-regression-842",
		},
	},
	{
		name: "cancel_after_effect", input: cancelAfterEffect,
		reconciliation: receipt.ReconciliationComplete, review: receipt.ReviewReady, final: "17.84",
		actions: []string{},
	},
	{
		name: "approved_on_request", input: approvedOnRequest,
		reconciliation: receipt.ReconciliationComplete, review: receipt.ReviewReady, final: "17.84",
		actions: []string{},
	},
	{
		name: "cancel_kept", input: cancelKept,
		reconciliation: receipt.ReconciliationComplete, review: receipt.ReviewReady, final: "17.84",
		actions: []string{},
	},
}

func actionList(r *receipt.Receipt) []string {
	out := []string{}
	for _, a := range r.NextActions {
		out = append(out, a.Action+" "+a.Target)
	}
	return out
}

func renderAll(t *testing.T, r *receipt.Receipt) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, format := range []string{"yaml", "json", "md"} {
		b, err := receipt.Render(r, format)
		if err != nil {
			t.Fatalf("Render(%s): %v", format, err)
		}
		out[format] = b
	}
	return out
}

func TestGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			r := receipt.Build(tc.input())
			if r.ReconciliationStatus != tc.reconciliation || r.ReviewStatus != tc.review {
				t.Errorf("status = %s/%s, want %s/%s", r.ReconciliationStatus, r.ReviewStatus, tc.reconciliation, tc.review)
			}
			if r.DuplicateJobs != tc.duplicates || r.FinalCostUSD.String() != tc.final || len(r.Breaches) != tc.breaches {
				t.Errorf("duplicates, final, breaches = %d, %s, %d, want %d, %s, %d",
					r.DuplicateJobs, r.FinalCostUSD, len(r.Breaches), tc.duplicates, tc.final, tc.breaches)
			}
			if got := actionList(r); !slices.Equal(got, tc.actions) {
				t.Errorf("next actions = %q, want %q", got, tc.actions)
			}
			for format, got := range renderAll(t, r) {
				path := filepath.Join("testdata", tc.name+"."+format+".golden")
				if *update {
					if err := os.WriteFile(path, got, 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run go test ./receipt -update to create it)", err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s rendering differs from %s:\n--- got ---\n%s\n--- want ---\n%s", format, path, got, want)
				}
			}
		})
	}
}

// TestGoldenDetails pins the facts each scenario exists to show, beyond
// the statuses TestGolden checks.
func TestGoldenDetails(t *testing.T) {
	t.Run("clean: the documented figures", func(t *testing.T) {
		r := receipt.Build(clean())
		got := fmt.Sprintf("%s %d %d %d %d %d %s %s %d %s",
			r.OperationID, r.IntendedRemoteJobs, r.Attempts, r.ObservedRemoteJobs, r.AttachedAttempts, r.DuplicateJobs,
			r.EstimatedCostUSD, r.FinalCostUSD, r.UnpricedAttempts, r.ResultUsed)
		want := "settlement-regression-842 1 2 1 1 0 18.00 17.84 0 hosted-suite-9912"
		if got != want {
			t.Errorf("figures = %q, want %q", got, want)
		}
		c := r.Cancellation
		if c == nil || !c.ClientStoppedWatching || c.CancellationRequested || c.EffectReversed != "" {
			t.Errorf("cancellation = %+v, want the client stopped watching and nothing cancelled", c)
		}
		if a := r.Approval; a == nil || a.HeadroomUSD.String() != "2.16" || a.RemoteJobsHeadroom != 0 {
			t.Errorf("approval = %+v, want headroom 2.16 and 0 remote jobs", a)
		}
	})
	t.Run("missing invoice: owner and due", func(t *testing.T) {
		r := receipt.Build(missingInvoice())
		a := r.NextActions[0]
		if a.Owner != "billing-oncall" || !a.Due.Equal(at(6*time.Minute+24*time.Hour)) {
			t.Errorf("check_late_invoice owner, due = %q, %s; want billing-oncall, %s", a.Owner, a.Due, at(6*time.Minute+24*time.Hour))
		}
		if r.UnpricedAttempts != 1 {
			t.Errorf("unpriced attempts = %d, want 1", r.UnpricedAttempts)
		}
	})
	t.Run("cost breach: figures", func(t *testing.T) {
		r := receipt.Build(costBreach())
		b := r.Breaches[0]
		if b.Kind != "cost_boundary_breach" || b.CeilingUSD.String() != "20.00" || b.OverByUSD.String() != "3.10" || b.ChargeID != "ch-9912-1" || !b.Open {
			t.Errorf("breach = %+v, want 23.10 over 20.00 by 3.10 on ch-9912-1, open", b)
		}
		if r.Approval.HeadroomUSD.String() != "-3.10" {
			t.Errorf("headroom = %s, want -3.10", r.Approval.HeadroomUSD)
		}
	})
	t.Run("cancellation after the effect", func(t *testing.T) {
		c := receipt.Build(cancelAfterEffect()).Cancellation
		want := receipt.Cancellation{
			ClientStoppedWatching: true, ClientStoppedWatchingAt: at(30 * time.Second),
			CancellationRequested: true, CancellationRequestedAt: at(7 * time.Minute),
			RequestedAfterEffect: true, EffectReversed: "no",
		}
		if c == nil || *c != want {
			t.Errorf("cancellation = %+v, want %+v", c, want)
		}
	})
	t.Run("cancellation kept by the policy", func(t *testing.T) {
		c := receipt.Build(cancelKept()).Cancellation
		want := receipt.Cancellation{
			CancellationRequested: true, CancellationRequestedAt: at(2 * time.Minute), KeptByPolicy: "before_send",
		}
		if c == nil || *c != want {
			t.Errorf("cancellation = %+v, want %+v", c, want)
		}
	})
}

func TestJSONMatchesSchema(t *testing.T) {
	var s jsonschema.Schema
	if err := json.Unmarshal(receipt.Schema(), &s); err != nil {
		t.Fatalf("receipt.schema.json does not parse: %v", err)
	}
	if s.Schema != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema = %q, want draft 2020-12", s.Schema)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("resolve schema: %v", err)
	}
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := receipt.Build(tc.input()).JSON()
			if err != nil {
				t.Fatal(err)
			}
			var doc any
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatal(err)
			}
			if err := rs.Validate(doc); err != nil {
				t.Errorf("JSON rendering does not match the schema: %v", err)
			}
		})
	}

	// The schema must reject what the receipt promises never to print.
	bad := []struct {
		name   string
		mutate func(r map[string]any)
	}{
		{"money as a number", func(r map[string]any) { r["final_cost_usd"] = 17.84 }},
		{"money without cents", func(r map[string]any) { r["final_cost_usd"] = "17" }},
		{"unknown review status", func(r map[string]any) { r["review_status"] = "approved" }},
		{"unknown reconciliation status", func(r map[string]any) { r["reconciliation_status"] = "done" }},
		{"missing operation ID", func(r map[string]any) { delete(r, "operation_id") }},
		{"unlisted field", func(r map[string]any) { r["surprise"] = true }},
		{"local time", func(r map[string]any) { r["generated_at"] = "2026-05-04T12:00:00+02:00" }},
	}
	for _, tt := range bad {
		t.Run("rejects "+tt.name, func(t *testing.T) {
			b, err := receipt.Build(clean()).JSON()
			if err != nil {
				t.Fatal(err)
			}
			var doc map[string]any
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatal(err)
			}
			tt.mutate(doc[receipt.DocumentKey].(map[string]any))
			if err := rs.Validate(doc); err == nil {
				t.Errorf("schema accepted a receipt with %s", tt.name)
			}
		})
	}
}

// node is a rendering reduced to what both formats must agree on: ordered
// keys and scalar texts.
type node struct {
	Keys   []string
	Fields map[string]*node
	Items  []*node
	Scalar string
	Kind   string // "map", "list" or "scalar"
}

func fromYAML(t *testing.T, n *yaml.Node) *node {
	t.Helper()
	switch n.Kind {
	case yaml.DocumentNode:
		return fromYAML(t, n.Content[0])
	case yaml.MappingNode:
		out := &node{Kind: "map", Fields: map[string]*node{}}
		for i := 0; i < len(n.Content); i += 2 {
			k := n.Content[i].Value
			out.Keys = append(out.Keys, k)
			out.Fields[k] = fromYAML(t, n.Content[i+1])
		}
		return out
	case yaml.SequenceNode:
		out := &node{Kind: "list", Items: []*node{}}
		for _, c := range n.Content {
			out.Items = append(out.Items, fromYAML(t, c))
		}
		return out
	case yaml.ScalarNode:
		return &node{Kind: "scalar", Scalar: n.Value}
	}
	t.Fatalf("unexpected YAML node kind %v", n.Kind)
	return nil
}

func fromJSON(t *testing.T, dec *json.Decoder) *node {
	t.Helper()
	tok, err := dec.Token()
	if err != nil {
		t.Fatal(err)
	}
	switch v := tok.(type) {
	case json.Delim:
		if v == '{' {
			out := &node{Kind: "map", Fields: map[string]*node{}}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					t.Fatal(err)
				}
				out.Keys = append(out.Keys, k.(string))
				out.Fields[k.(string)] = fromJSON(t, dec)
			}
			dec.Token()
			return out
		}
		out := &node{Kind: "list", Items: []*node{}}
		for dec.More() {
			out.Items = append(out.Items, fromJSON(t, dec))
		}
		dec.Token()
		return out
	case json.Number:
		if strings.ContainsAny(string(v), ".eE") {
			t.Errorf("JSON rendering holds a non-integer number %s; money must be a decimal string", v)
		}
		return &node{Kind: "scalar", Scalar: string(v)}
	case string:
		return &node{Kind: "scalar", Scalar: v}
	case bool:
		return &node{Kind: "scalar", Scalar: fmt.Sprint(v)}
	}
	t.Fatalf("unexpected JSON token %v", tok)
	return nil
}

// TestYAMLAndJSONAgree decodes both renderings of every case and compares
// keys, their order and every scalar's text, so a figure cannot differ
// between them.
func TestYAMLAndJSONAgree(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			r := receipt.Build(tc.input())
			y, err := r.YAML()
			if err != nil {
				t.Fatal(err)
			}
			j, err := r.JSON()
			if err != nil {
				t.Fatal(err)
			}
			var yn yaml.Node
			if err := yaml.Unmarshal(y, &yn); err != nil {
				t.Fatal(err)
			}
			dec := json.NewDecoder(bytes.NewReader(j))
			dec.UseNumber()
			fromY, fromJ := fromYAML(t, &yn), fromJSON(t, dec)
			if !reflect.DeepEqual(fromY, fromJ) {
				yb, _ := json.Marshal(fromY)
				jb, _ := json.Marshal(fromJ)
				t.Errorf("YAML and JSON renderings differ:\nyaml: %s\njson: %s", yb, jb)
			}
			if got := fromJ.Fields[receipt.DocumentKey].Fields["final_cost_usd"].Scalar; got != tc.final {
				t.Errorf("final_cost_usd = %q, want %q", got, tc.final)
			}
		})
	}
}

// TestMoneyIsDecimalText checks the two money promises: JSON strings,
// unquoted YAML decimals.
func TestMoneyIsDecimalText(t *testing.T) {
	r := receipt.Build(costBreach())
	j, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"final_cost_usd": "23.10"`, `"ceiling_usd": "20.00"`, `"over_by_usd": "3.10"`, `"headroom_usd": "-3.10"`, `"amount": "23.10"`} {
		if !bytes.Contains(j, []byte(want)) {
			t.Errorf("JSON lacks %s", want)
		}
	}
	y, err := r.YAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\n  final_cost_usd: 23.10\n", "\n  estimated_cost_usd: 18.00\n", "    over_by_usd: 3.10\n", "    headroom_usd: -3.10\n"} {
		if !bytes.Contains(y, []byte(want)) {
			t.Errorf("YAML lacks %q", want)
		}
	}
	var n yaml.Node
	if err := yaml.Unmarshal(y, &n); err != nil {
		t.Fatal(err)
	}
	var walk func(*yaml.Node)
	walk = func(n *yaml.Node) {
		for i, c := range n.Content {
			if n.Kind == yaml.MappingNode && i%2 == 1 && strings.HasSuffix(n.Content[i-1].Value, "_usd") {
				if c.Tag != "!!float" || c.Style != 0 {
					t.Errorf("%s: tag %s style %v, want a plain decimal", n.Content[i-1].Value, c.Tag, c.Style)
				}
			}
			walk(c)
		}
	}
	walk(&n)
}

// The schema admits a receipt of an operation in any state the ledger has.
func TestSchemaNamesEveryState(t *testing.T) {
	var doc struct {
		Defs struct {
			Receipt struct {
				Properties struct {
					State struct {
						Enum []string `json:"enum"`
					} `json:"state"`
				} `json:"properties"`
			} `json:"receipt"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(receipt.Schema(), &doc); err != nil {
		t.Fatal(err)
	}
	enum := doc.Defs.Receipt.Properties.State.Enum
	for _, s := range []ledger.State{
		ledger.StateAwaitingApproval, ledger.StateAccepted, ledger.StateSending, ledger.StateRunning, ledger.StateInputRequired,
		ledger.StateReview, ledger.StateCompleted, ledger.StateFailed, ledger.StateCancelled,
	} {
		if !slices.Contains(enum, string(s)) {
			t.Errorf("receipt.schema.json's state enum %v lacks %q", enum, s)
		}
	}
}
