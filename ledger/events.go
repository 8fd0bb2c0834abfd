package ledger

import (
	"encoding/json"
	"time"
)

// Event is one append-only line in an operation's history.
type Event struct {
	ID           int64
	OperationRef int64
	AttemptRef   int64
	Kind         EventKind
	Data         json.RawMessage
	CreatedAt    time.Time
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
)
