package ledger

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestEventDataBytes pins the stored form of each payload to the map
// literal that wrote it before the payload types existed: existing ledgers
// and new records must read the same.
func TestEventDataBytes(t *testing.T) {
	tests := []struct {
		name string
		data any
		was  any
	}{
		{"conflict", ConflictData{Reason: "r", RequestID: "req"},
			map[string]string{"request_id": "req", "reason": "r"}},
		{"denied", DeniedData{OperationID: "op", Reason: "r", RequestID: "req"},
			map[string]string{"request_id": "req", "operation_id": "op", "reason": "r"}},
		{"denied without an operation", DeniedData{Reason: "r", RequestID: "req"},
			map[string]string{"request_id": "req", "reason": "r"}},
		{"client_result", ClientResultData{ClientResult: ClientDisconnected, RequestID: "req"},
			map[string]string{"request_id": "req", "client_result": "disconnected"}},
		{"send_started", SendStartedData{Send: 2, Worker: "w"},
			map[string]any{"send": 2, "worker": "w"}},
		{"remote_job_bound", RemoteJobData{Kind: JobKindProviderJob, RemoteJobID: "j"},
			map[string]string{"remote_job_id": "j", "kind": "provider_job"}},
		{"remote_job_bound via", RemoteJobData{Kind: JobKindProviderJob, RemoteJobID: "j", Via: "lookup"},
			map[string]string{"remote_job_id": "j", "kind": "provider_job", "via": "lookup"}},
		{"remote_job_observed", RemoteJobData{RemoteJobID: "j", Status: JobCompleted},
			map[string]string{"remote_job_id": "j", "status": "completed"}},
		{"remote job after a change", RemoteJobData{Detail: "d", Kind: JobKindUpstreamTask, OperationState: StateCancelled, RemoteJobID: "j", Status: JobRunning},
			map[string]string{"remote_job_id": "j", "kind": "upstream_task", "status": "running", "operation_state": "cancelled", "detail": "d"}},
		{"lookup", LookupData{Action: "attach", Answer: "accepted", Detail: "d", RemoteJobID: new(""), RetryPolicy: RetryLookupThenAttach, SinceSendMS: new(int64(0))},
			map[string]any{"answer": "accepted", "remote_job_id": "", "action": "attach", "detail": "d", "since_send_ms": 0, "retry_policy": "lookup_then_attach"}},
		{"lookup not sent", LookupData{Answer: LookupNotSent, Detail: "d"},
			map[string]string{"answer": "not_sent", "detail": "d"}},
		{"require_review", RequireReviewData{Reason: "r"}, map[string]string{"reason": "r"}},
		{"require_review with a message", RequireReviewData{Message: "m", Reason: "r"}, map[string]string{"reason": "r", "message": "m"}},
		{"resolved", ResolvedData{Action: "attach", Actor: "a", Note: "", RemoteJobID: "j"},
			map[string]string{"actor": "a", "note": "", "action": "attach", "remote_job_id": "j"}},
		{"result_stored", ResultStoredData{IsError: new(false), RemoteJobID: "j"},
			map[string]any{"remote_job_id": "j", "is_error": false}},
		{"result_stored by fetch", ResultStoredData{RemoteJobID: "j", Via: "fetch"},
			map[string]string{"remote_job_id": "j", "via": "fetch"}},
		{"failed", FailedData{RemoteJobID: "j"}, map[string]string{"remote_job_id": "j"}},
		{"failed with a message", FailedData{Message: "m", RemoteJobID: "j"}, map[string]string{"remote_job_id": "j", "message": "m"}},
		{"failed before work", FailedData{Code: -32602, Message: "m", NothingStarted: true},
			map[string]any{"code": int64(-32602), "message": "m", "nothing_started": true}},
		{"cancellation_requested", CancellationRequestedData{AfterEffect: false, Era: "2026-07-28", State: StateRunning},
			map[string]any{"era": "2026-07-28", "state": StateRunning, "after_effect": false}},
		{"cancel_sent", CancelSentData{Error: "e"}, map[string]string{"error": "e"}},
		{"cancel_sent refused", CancelSentData{Error: "e", RemoteJobID: "j"}, map[string]string{"remote_job_id": "j", "error": "e"}},
		{"cancel_sent taken", CancelSentData{Detail: new(""), RemoteJobID: "j"}, map[string]string{"remote_job_id": "j", "detail": ""}},
		{"effect_reversed", EffectReversedData{RemoteJobID: "j"}, map[string]string{"remote_job_id": "j"}},
		{"effect_not_reversed", EffectNotReversedData{Detail: "", JobStatus: JobCompleted, RemoteJobID: "j"},
			map[string]string{"remote_job_id": "j", "detail": "", "job_status": "completed"}},
		{"input_requested", InputRequestedData{Channel: InputChannelTaskUpdate, Requests: json.RawMessage(`{"confirm":{}}`), RequestState: true, Send: 1},
			map[string]any{"channel": "tasks_update", "requests": map[string]any{"confirm": map[string]any{}}, "request_state": true, "send": 1}},
		{"input_requested in flight", InputRequestedData{Channel: InputChannelTaskResult, InFlight: true, Requests: json.RawMessage(`{}`), Send: 2},
			map[string]any{"channel": "tasks_result", "in_flight": true, "requests": map[string]any{}, "send": 2}},
		{"input_requested renamed", InputRequestedData{Channel: InputChannelTaskUpdate, Renamed: map[string]string{"confirm~2": "confirm"}, Requests: json.RawMessage(`{}`), Send: 2},
			map[string]any{"channel": "tasks_update", "renamed": map[string]string{"confirm~2": "confirm"}, "requests": map[string]any{}, "send": 2}},
		{"input_answered", InputAnsweredData{Actions: map[string]string{"confirm": "accept"}, RequestID: "req", Responses: json.RawMessage(`{"confirm":{"action":"accept"}}`), Send: 1},
			map[string]any{"actions": map[string]string{"confirm": "accept"}, "request_id": "req", "responses": map[string]any{"confirm": map[string]string{"action": "accept"}}, "send": 1}},
		{"cost_boundary_breach", CostBoundaryBreachData{ApprovalTotal: "21", Ceiling: "20", FinalCost: "21", OverBy: "1"},
			map[string]any{"final_cost": "21", "approval_total": "21", "ceiling": "20", "over_by": "1"}},
		{"cost_boundary_breach not comparable", CostBoundaryBreachData{Ceiling: "20 USD", FinalCost: "21 EUR", Reason: "amounts_not_comparable", UncountedCharges: []string{"c"}, UncountedReservations: []int64{3}},
			map[string]any{"reason": "amounts_not_comparable", "final_cost": "21 EUR", "ceiling": "20 USD", "uncounted_charges": []string{"c"}, "uncounted_reservations": []int64{3}}},
		{"duplicate_job", DuplicateJobData{RemoteJobID: "j"}, map[string]string{"remote_job_id": "j"}},
		{"reconciled", ReconciledData{Complete: true, Detail: "", Duplicates: new(0), FinalCost: "0.00", Jobs: new(0), Lookup: "answered", MissingInvoice: new(false)},
			map[string]any{"lookup": "answered", "detail": "", "complete": true, "jobs": 0, "duplicates": 0, "final_cost": "0.00", "missing_invoice": false}},
		{"reconciled authoritative", ReconciledData{Authoritative: true, Complete: false, Detail: "d", Duplicates: new(1), FinalCost: "1.00", Jobs: new(2), Lookup: "answered", MissingInvoice: new(true)},
			map[string]any{"lookup": "answered", "detail": "d", "complete": false, "jobs": 2, "duplicates": 1, "final_cost": "1.00", "missing_invoice": true, "authoritative": true}},
		{"reconciled without a lookup", ReconciledData{Complete: false, Detail: "d", Lookup: "indeterminate"},
			map[string]any{"lookup": "indeterminate", "detail": "d", "complete": false}},
		{"recovered", RecoveredData{LapsedOwner: "w", State: StateSending}, map[string]string{"state": "sending", "lapsed_owner": "w"}},
	}
	for _, tt := range tests {
		got, err := json.Marshal(tt.data)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		want, err := json.Marshal(tt.was)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if string(got) != string(want) {
			t.Errorf("%s: stored as %s, want %s", tt.name, got, want)
		}
	}
}

func TestDecodeEventData(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		want    FailedData
		wantErr bool
	}{
		{"no data", "", FailedData{}, false},
		{"an object", `{"remote_job_id":"j","nothing_started":true}`, FailedData{RemoteJobID: "j", NothingStarted: true}, false},
		{"not an object", `"ok"`, FailedData{}, true},
		{"not JSON", `not json`, FailedData{}, true},
		// A record read in part is not read: nothing of it counts.
		{"a field of the wrong type", `{"remote_job_id":"j","nothing_started":"yes"}`, FailedData{}, true},
	}
	for _, tt := range tests {
		e := &Event{ID: 7, Kind: EventFailed, Data: json.RawMessage(tt.data)}
		got, err := DecodeEventData[FailedData](e)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("%s: DecodeEventData(%s) = %+v, %v; want %+v, error %v", tt.name, tt.data, got, err, tt.want, tt.wantErr)
		}
	}
}

// A provider's answer is kept as it is up to MaxRecordBytes, and beyond it
// by its digest and length.
func TestProviderAnswer(t *testing.T) {
	small := `{"status":"succeeded","finished_ns":1714800000000000000}`
	if got := ProviderAnswer([]byte(small)); got != small {
		t.Errorf("ProviderAnswer(small) = %q, want it as it is", got)
	}
	exact := strings.Repeat("x", MaxRecordBytes)
	if got := ProviderAnswer([]byte(exact)); got != exact {
		t.Errorf("an answer of exactly MaxRecordBytes was not kept as it is")
	}
	big := []byte(strings.Repeat("y", MaxRecordBytes+1))
	got := ProviderAnswer(big)
	if !strings.HasPrefix(got, "sha256:") || !strings.HasSuffix(got, fmt.Sprintf(" (%d bytes, too long to keep)", len(big))) || len(got) > 200 {
		t.Errorf("ProviderAnswer(big) = %q, want its digest and length", got)
	}
	if ProviderAnswer(append(big[:len(big):len(big)], 'z')) == got {
		t.Error("two different long answers have the same record")
	}
}
