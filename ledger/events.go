package ledger

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"time"
)

// Event is one append-only line in an operation's history, and a link of
// its operation's hash chain (see [EventHash]).
type Event struct {
	ID           int64
	OperationRef int64
	AttemptRef   int64
	Kind         EventKind
	// Data is the event's payload as the ledger stores it, byte for byte.
	Data      json.RawMessage
	CreatedAt time.Time
	// Hash is the event's link in its operation's chain, [EventHash] of
	// the event; PrevHash is the link it follows: the hash of the
	// operation's event before it, "" for its operation's first event, or
	// [ChainStartMigration]. Both are empty for an event recorded before
	// the ledger kept chains, and for one that belongs to no operation.
	Hash     string
	PrevHash string
}

// EventKind names what an event records. Its values are stable strings,
// stored in the event log and printed in receipts.
type EventKind string

// Event kinds. "The client stopped watching", "cancellation was requested"
// and "the effect was reversed" are deliberately separate kinds. An
// acceptance writes no event: the operation and its created attempt
// record it. (Ledgers from before migration 00005 hold "accepted" events.)
const (
	EventConflict              EventKind = "conflict"
	EventDenied                EventKind = "denied"
	EventClientResult          EventKind = "client_result"
	EventClientStoppedWatching EventKind = "client_stopped_watching"
	EventSendStarted           EventKind = "send_started"
	EventRemoteJobBound        EventKind = "remote_job_bound"
	EventRemoteJobObserved     EventKind = "remote_job_observed"
	EventLookup                EventKind = "lookup"
	EventRequireReview         EventKind = "require_review"
	EventResolved              EventKind = "resolved"
	EventResultStored          EventKind = "result_stored"
	EventFailed                EventKind = "failed"
	EventCancellationRequested EventKind = "cancellation_requested"
	EventCancelSent            EventKind = "cancel_sent"
	EventEffectReversed        EventKind = "effect_reversed"
	EventEffectNotReversed     EventKind = "effect_not_reversed"
	EventChargeRecorded        EventKind = "charge_recorded"
	EventCostBoundaryBreach    EventKind = "cost_boundary_breach"
	EventDuplicateJob          EventKind = "duplicate_job"
	EventReconciled            EventKind = "reconciled"
	EventRecovered             EventKind = "recovered"
	// EventInputRequested: the upstream asked a question during the call;
	// EventInputAnswered: the client's answer was recorded, to be sent;
	// EventInputDeclined: the client declined it, and nothing more is sent.
	EventInputRequested EventKind = "input_requested"
	EventInputAnswered  EventKind = "input_answered"
	EventInputDeclined  EventKind = "input_declined"
	// EventApprovalRequested: the operation waits for its approval
	// request; EventApprovalRequestApproved and ...Declined: an approver
	// decided it; EventApprovalRequestExpired: nobody did in time. Each
	// names the request, and a decision the approver's credential.
	EventApprovalRequested       EventKind = "approval_requested"
	EventApprovalRequestApproved EventKind = "approval_request_approved"
	EventApprovalRequestDeclined EventKind = "approval_request_declined"
	EventApprovalRequestExpired  EventKind = "approval_request_expired"
)

// The data of each event kind that carries any. Their JSON keys are the
// stored format, read back from ledgers of every version: never rename one.
// Fields are in the order of their keys, as the maps that wrote them before
// these types kept them. A field some writers of a kind leave out is
// omitted when empty; one whose zero value is a fact (a count of 0,
// is_error false) is a pointer instead, so that it is omitted only when
// not known.

// ConflictData is the data of a conflict event.
type ConflictData struct {
	Reason    string `json:"reason"`
	RequestID string `json:"request_id"`
}

// DeniedData is the data of a denied event. OperationID is empty for a
// denial that named no operation.
type DeniedData struct {
	OperationID string `json:"operation_id,omitempty"`
	Reason      string `json:"reason"`
	RequestID   string `json:"request_id"`
}

// ClientResultData is the data of client_result and client_stopped_watching
// events: what the client of one attempt got.
type ClientResultData struct {
	ClientResult ClientResult `json:"client_result"`
	RequestID    string       `json:"request_id"`
}

// SendStartedData is the data of a send_started event: the operation's
// Send'th send, by Worker, with the credential Credential names (a
// fingerprint, never the credential; "" in sends recorded before it was).
type SendStartedData struct {
	Send       int    `json:"send"`
	Worker     string `json:"worker"`
	Credential string `json:"credential,omitempty"`
}

// RemoteJobData is the data of remote_job_bound and remote_job_observed
// events. Via says how a bound job was found ("fetch", a lookup, a
// resolution); OperationState and Detail are set when the job was recorded
// after the operation changed under the worker.
type RemoteJobData struct {
	Detail         string        `json:"detail,omitempty"`
	Kind           RemoteJobKind `json:"kind,omitempty"`
	OperationState State         `json:"operation_state,omitempty"`
	RemoteJobID    string        `json:"remote_job_id"`
	Status         JobStatus     `json:"status,omitempty"`
	Via            string        `json:"via,omitempty"`
}

// LookupData is the data of a lookup event: what the provider answered
// when asked about the operation, and what the gateway did about it. A send
// that never left the gateway is recorded with Answer "not_sent" and
// Detail only.
type LookupData struct {
	Action      string      `json:"action,omitempty"`
	Answer      string      `json:"answer"`
	Detail      string      `json:"detail"`
	RemoteJobID *string     `json:"remote_job_id,omitempty"`
	RetryPolicy RetryPolicy `json:"retry_policy,omitempty"`
	SinceSendMS *int64      `json:"since_send_ms,omitempty"`
}

// LookupNotSent is the answer of a lookup event for a send that never left
// the gateway: it started nothing.
const LookupNotSent = "not_sent"

// RequireReviewData is the data of a require_review event.
type RequireReviewData struct {
	Message string `json:"message,omitempty"`
	Reason  string `json:"reason"`
}

// ResolvedData is the data of a resolved event: a human's resolution of a
// review.
type ResolvedData struct {
	Action      string `json:"action"`
	Actor       string `json:"actor"`
	Note        string `json:"note"`
	RemoteJobID string `json:"remote_job_id"`
}

// ResultStoredData is the data of a result_stored event. Via is "fetch"
// when the result was fetched by the job's ID rather than returned.
type ResultStoredData struct {
	IsError     *bool  `json:"is_error,omitempty"`
	RemoteJobID string `json:"remote_job_id"`
	Via         string `json:"via,omitempty"`
}

// FailedData is the data of a failed event. NothingStarted says that the
// upstream refused the call before any work began.
type FailedData struct {
	Code           int64  `json:"code,omitempty"`
	Message        string `json:"message,omitempty"`
	NothingStarted bool   `json:"nothing_started,omitempty"`
	RemoteJobID    string `json:"remote_job_id,omitempty"`
}

// CancellationRequestedData is the data of a cancellation_requested event.
// Without a RemoteJobID the request is for the whole operation.
type CancellationRequestedData struct {
	AfterEffect bool   `json:"after_effect"`
	Era         string `json:"era"`
	RemoteJobID string `json:"remote_job_id,omitempty"`
	State       State  `json:"state"`
	// KeptBy names the tool's client_cancel policy when it kept the
	// operation running despite the request (before_send, after the
	// send); empty when the request cancels.
	KeptBy ClientCancel `json:"kept_by,omitempty"`
}

// CancelSentData is the data of a cancel_sent event: the provider took the
// cancellation of RemoteJobID unless Error is set.
type CancelSentData struct {
	Detail      *string `json:"detail,omitempty"`
	Error       string  `json:"error,omitempty"`
	RemoteJobID string  `json:"remote_job_id,omitempty"`
}

// EffectReversedData is the data of an effect_reversed event. Without a
// RemoteJobID it is about the whole operation.
type EffectReversedData struct {
	RemoteJobID string `json:"remote_job_id"`
}

// EffectNotReversedData is the data of an effect_not_reversed event.
type EffectNotReversedData struct {
	Detail      string    `json:"detail"`
	JobStatus   JobStatus `json:"job_status"`
	RemoteJobID string    `json:"remote_job_id"`
}

// CostBoundaryBreachData is the data of a cost_boundary_breach event.
// Amounts are decimal strings; Reason is "amounts_not_comparable" when the
// final cost could not be compared with the ceiling, and then the
// uncounted charges and reservations are named instead of the totals.
//
// A breach of a budget names it in Budget, and BudgetTotal is what the
// budget is committed to in the operation's period with the final cost;
// a breach of the operation's approval has neither.
type CostBoundaryBreachData struct {
	ApprovalTotal         string   `json:"approval_total,omitempty"`
	Budget                int64    `json:"budget,omitempty"`
	BudgetTotal           string   `json:"budget_total,omitempty"`
	Ceiling               string   `json:"ceiling"`
	FinalCost             string   `json:"final_cost"`
	OverBy                string   `json:"over_by,omitempty"`
	Reason                string   `json:"reason,omitempty"`
	UncountedCharges      []string `json:"uncounted_charges,omitempty"`
	UncountedReservations []int64  `json:"uncounted_reservations,omitempty"`
}

// DuplicateJobData is the data of a duplicate_job event.
type DuplicateJobData struct {
	RemoteJobID string `json:"remote_job_id"`
}

// ReconciledData is the data of a reconciled event: one pass of the
// reconciler. Lookup is "answered" or "indeterminate"; Authoritative says
// that the provider's answer proves that a send without a known remote job
// started none. The counts are unset when the pass could not ask.
type ReconciledData struct {
	Authoritative  bool   `json:"authoritative,omitempty"`
	Complete       bool   `json:"complete"`
	Detail         string `json:"detail"`
	Duplicates     *int   `json:"duplicates,omitempty"`
	FinalCost      string `json:"final_cost,omitempty"`
	Jobs           *int   `json:"jobs,omitempty"`
	Lookup         string `json:"lookup"`
	MissingInvoice *bool  `json:"missing_invoice,omitempty"`
	// Evidence is the provider's own records this pass read that differ
	// from the ones recorded before: when it saw them is the event's time.
	Evidence []ProviderRecord `json:"evidence,omitempty"`
}

// ProviderRecordKind names what a provider record is the evidence of.
type ProviderRecordKind string

const (
	// RecordStatus is a job's status as the provider reported it (a fetch,
	// a lookup or an upstream task).
	RecordStatus ProviderRecordKind = "status"
	// RecordCharges is a job's charges as the provider listed them.
	RecordCharges ProviderRecordKind = "charges"
)

// ProviderRecord is one answer of the provider about one remote job, as
// the provider returned it (secret argument values redacted): the evidence
// a receipt links the job's effect and charges to.
type ProviderRecord struct {
	RemoteJobID string             `json:"remote_job_id"`
	Kind        ProviderRecordKind `json:"kind"`
	// Tool is the contract tool (or MCP method) that answered.
	Tool string `json:"tool"`
	// Answer is the answer's JSON text, kept as text: the provider's
	// numbers stay exactly as written, and no value of the provider's can
	// stop an event or a receipt from being canonicalised (RFC 8785 allows
	// no integer beyond 2^53). One longer than MaxRecordBytes is replaced
	// by its digest ([ProviderAnswer]).
	Answer string `json:"answer"`
}

// MaxRecordBytes bounds a provider record's answer kept in the ledger.
const MaxRecordBytes = 16 << 10

// ProviderAnswer is how a provider record keeps raw: as it is, or, beyond
// MaxRecordBytes, as its SHA-256 and length, which still identify the
// provider's answer without keeping its bulk.
func ProviderAnswer(raw []byte) string {
	if len(raw) <= MaxRecordBytes {
		return string(raw)
	}
	sum := sha256.Sum256(raw)
	return fmt.Sprintf("sha256:%x (%d bytes, too long to keep)", sum, len(raw))
}

// RecoveredData is the data of a recovered event: the operation was taken
// over in State after LapsedOwner's lease lapsed.
type RecoveredData struct {
	LapsedOwner string `json:"lapsed_owner"`
	State       State  `json:"state"`
}

// InputRequestedData is the data of an input_requested event: the
// upstream's questions in its answer to the operation's Send'th send (or
// those of the task it started, UpstreamTask), keyed as the upstream keyed
// them ({method, params} each), with the values of secret arguments
// redacted. RequestState says whether the
// upstream sent state to return with the answers (the state itself is
// kept with the operation, not here). InFlight says that the question was
// asked within the call (a 2025-11-25 elicitation/create), which waits for
// the answer and dies with the gateway process that holds it. Requests are
// keyed as the client sees them: a key the upstream used in an earlier
// round is renamed (keys must be unique over a task's life), and Renamed
// maps each renamed key to the upstream's.
type InputRequestedData struct {
	Channel      InputChannel      `json:"channel"`
	InFlight     bool              `json:"in_flight,omitempty"`
	Renamed      map[string]string `json:"renamed,omitempty"`
	RequestState bool              `json:"request_state,omitempty"`
	Requests     json.RawMessage   `json:"requests"`
	Send         int               `json:"send"`
	// UpstreamTask is the ID of the upstream task that asked, for a
	// question an upstream task asked while it ran: its answer goes to
	// that task, not into another send.
	UpstreamTask string `json:"upstream_task,omitempty"`
}

// InputAnsweredData is the data of input_answered and input_declined
// events: the client's answers to the questions of the Send'th send, keyed as the
// questions were, with the values of secret arguments redacted; Actions
// holds each elicitation answer's action (accept, decline, cancel).
type InputAnsweredData struct {
	Actions   map[string]string `json:"actions,omitempty"`
	RequestID string            `json:"request_id,omitempty"`
	Responses json.RawMessage   `json:"responses"`
	Send      int               `json:"send"`
}

// ApprovalRequestData is the data of the approval request events: which
// request, who asked (RequestedBy, on approval_requested) or who decided
// (Approver, the credential ID; empty for an expiry), the approval an
// approve created and the approver's note.
type ApprovalRequestData struct {
	ApprovalID  int64  `json:"approval_id,omitempty"`
	Approver    string `json:"approver,omitempty"`
	ExpiresAt   string `json:"expires_at,omitempty"`
	Note        string `json:"note,omitempty"`
	RequestID   int64  `json:"request_id"`
	RequestedBy string `json:"requested_by,omitempty"`
}

// DecodeEventData reads the data of e as T, the payload type of its kind.
// An event without data reads as T's zero value. An error means the record
// cannot be read; it then proves nothing, and T is its zero value, never a
// part of the record.
func DecodeEventData[T any](e *Event) (T, error) {
	var d T
	if len(e.Data) == 0 {
		return d, nil
	}
	if err := json.Unmarshal(e.Data, &d); err != nil {
		var zero T
		return zero, fmt.Errorf("unreadable %s event %d: %w", e.Kind, e.ID, err)
	}
	return d, nil
}
