package ledger

import (
	"encoding/json"
	"time"

	"github.com/riverqueue/river"

	"github.com/taskgate/taskgate/money"
)

// LeaseQueued is the lease owner of an operation whose job waits in the
// queue: any worker may claim it.
const LeaseQueued = "queued"

// TransitionParams describe one atomic change of an operation: its state,
// what was learnt about its remote jobs and charges, the events that record
// why, and the jobs to run next. Everything commits together or not at all.
type TransitionParams struct {
	OperationRef int64
	// Owner, when set, must hold the operation's lease.
	Owner string
	// From lists the states the operation must be in; empty means any.
	From []State
	// RequireLeaseLapsed makes the change apply only when nobody holds an
	// unexpired lease (recovery after a crash).
	RequireLeaseLapsed bool
	// To is the new state; empty keeps the current one. A move
	// [State.CanBecome] forbids fails with ErrIllegalTransition.
	To            State
	StatusMessage *string
	// StatusMessageWas, when set, makes StatusMessage apply only while the
	// operation's status message is still this; otherwise the one written
	// meanwhile (such as the reason a cancel was kept) stays, and the rest
	// of the change applies.
	StatusMessageWas *string
	ReviewReason     *string
	Result           json.RawMessage
	Error            json.RawMessage
	IncrementSend    bool
	// Lease, when set, replaces the lease (owner "" releases it).
	Lease           *Lease
	CancelRequested bool
	// CancelOnce makes the change apply only when no request to cancel the
	// operation (an EventCancellationRequested) was recorded before
	// (ErrCancelRequested otherwise): a client that cancels twice at once
	// causes one cancellation.
	CancelOnce bool
	CostBreach bool
	// ExpireKey frees the operation ID for reuse (after retention).
	ExpireKey bool
	// EraseSecrets overwrites the values of the operation's secret
	// arguments with "[redacted]"; see [SecretsErasable]. The operation
	// must have ended (ErrStateChanged otherwise).
	EraseSecrets bool
	RemoteJobs   []*RemoteJobUpsert
	Charges      []*ChargeUpsert
	Creator      *AttemptKnowledge
	Reservation  *ReservationUpdate
	Events       []EventParams
	Enqueue      []river.InsertManyParams
	// Input, when set, replaces the operation's outstanding question and
	// recorded answers.
	Input *InputUpdate
	// InputWas, when set, makes the change apply only while the
	// operation's question round is still exactly this one (requests,
	// request state and answers as read): ErrStateChanged otherwise. Two
	// answers to different keys of one question both read the same round;
	// the later must read again rather than overwrite the other's answer.
	InputWas *InputUpdate
	Now      time.Time
}

// InputUpdate is the operation's question round as it now stands: the
// upstream's outstanding InputRequests and RequestState, and the
// InputResponses to send with the next round. Empty fields are stored
// empty: a round answered clears its requests, a round sent its answers.
type InputUpdate struct {
	Requests     json.RawMessage
	RequestState string
	Responses    json.RawMessage
}

// Lease is who works on an operation until when.
type Lease struct {
	Owner string
	Until time.Time
}

// RemoteJobUpsert records a remote job or what was learnt about it, keyed
// by (upstream, RemoteJobID). Zero fields leave stored values unchanged.
type RemoteJobUpsert struct {
	Upstream       string
	Endpoint       string
	RemoteJobID    string
	UpstreamTaskID string
	// RenameFrom re-keys a job first known by another ID (an upstream task
	// ID) to its provider job ID.
	RenameFrom        string
	Kind              RemoteJobKind
	Status            JobStatus
	Intended          *bool
	Duplicate         *bool
	DuplicateResolved string
	Result            json.RawMessage
	AttemptRef        int64
	CancelRequested   bool
	EffectReversed    Knowledge
}

// ChargeUpsert records a charge, keyed by the provider's charge ID.
type ChargeUpsert struct {
	RemoteJobID      string // the job it belongs to, if known
	ProviderChargeID string
	Amount           money.Amount
	Status           ChargeStatus
	Source           string
	// Kind is what the provider calls the charge; empty when it names none.
	Kind string
}

// AttemptKnowledge updates what is known remotely about an attempt; empty
// fields are left unchanged.
type AttemptKnowledge struct {
	RemoteAccepted Knowledge
	RemoteEffect   Knowledge
	ChargeStatus   Knowledge
}

// ReservationUpdate settles or releases an operation's reservation.
type ReservationUpdate struct {
	Status  ReservationStatus
	Settled money.Amount
}

// EventParams is one event to append.
type EventParams struct {
	Kind       EventKind
	AttemptRef int64
	Data       any
}
