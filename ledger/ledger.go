// Package ledger holds taskgate's durable record of work: operations, the
// attempts that tried to obtain them, the remote jobs and charges they caused,
// the approvals they ran under and the spend reserved against them, the
// approval requests calls wait on, pending approval questions, tenants' API
// keys (by hash) and an append-only event log; stores enqueue background
// jobs in the same transactions. It defines the [Store] interface that the
// SQLite and PostgreSQL stores implement, the pure acceptance decision
// ([Decide]) and the table of the moves an operation's [State] may make
// ([State.CanBecome]), which every store enforces.
//
// The ledger is the only source of truth for a task: nothing about an
// operation may live only in process memory. This package must never perform
// network I/O to MCP servers or providers, and never decide spend policy
// itself (that is package policy); it records what those decisions were.
package ledger

import (
	"crypto/sha256"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/secrets"
)

// Decision is the outcome of one attempt, per the acceptance table.
type Decision string

const (
	// DecisionCreated: nothing was stored for (tenant, operation ID); the
	// operation, this attempt and its dispatch job were committed together.
	DecisionCreated Decision = "created"
	// DecisionAttached: the operation exists with the same fingerprint; the
	// attempt was recorded and no new work started.
	DecisionAttached Decision = "attached"
	// DecisionConflict: the operation exists with a different fingerprint;
	// the attempt was recorded and no work started.
	DecisionConflict Decision = "conflict"
	// DecisionDenied: policy refused the attempt before any effect could
	// start; the operation ID was not consumed.
	DecisionDenied Decision = "denied"
)

// Reasons recorded with conflict and denied decisions. They are stable
// strings: JSON-RPC errors carry them as data.reason, receipts print them.
const (
	ReasonArgumentsDiffer     = "operation_id_reused_with_different_arguments"
	ReasonOperationIDRequired = "operation_id_required"
	// ReasonInvalidOperationID: the operation ID holds a character outside
	// the alphabet of [CheckID], or is empty, too long or a dot segment;
	// nothing is recorded under it.
	ReasonInvalidOperationID    = "invalid_operation_id"
	ReasonApprovalRequired      = "approval_required"
	ReasonApprovalExpired       = "approval_expired"
	ReasonCostCeilingExceeded   = "cost_ceiling_exceeded"
	ReasonRemoteJobLimitReached = "remote_job_limit_reached"
	ReasonRetryUsesNewOperation = "retry_uses_new_operation_id"
	ReasonApprovalToolMismatch  = "approval_tool_mismatch"
	// ReasonApprovalDeclined and ReasonApprovalInvalid: the user, asked to
	// approve the call, declined or gave an answer that approves nothing.
	// An approver's decline of an approval request ends its operation
	// with ReasonApprovalDeclined too.
	ReasonApprovalDeclined = "approval_declined"
	ReasonApprovalInvalid  = "approval_invalid"
	// ReasonApprovalRequestExpired: no approver decided the operation's
	// approval request before it expired, so nothing was started.
	ReasonApprovalRequestExpired = "approval_request_expired"
	// ReasonEstimateUnavailable: the contract prices calls with an
	// estimate tool, and it gave no estimate.
	ReasonEstimateUnavailable = "estimate_unavailable"
	// ReasonConfigurationChanged: the configuration no longer has the
	// operation's tool, so it cannot be dispatched.
	ReasonConfigurationChanged = "configuration_changed"
	// ReasonUpstreamUnavailable: the tool's upstream has no session, so a
	// new operation is not accepted (nothing could start it now); a retry
	// of an operation accepted before still attaches to it.
	ReasonUpstreamUnavailable = "upstream_unavailable"
	// ReasonContractUnavailable: the tool takes the provider contract its
	// upstream declares, and has none in force (not listed yet, missing,
	// invalid, or changed since it was adopted), so a new operation is
	// not accepted; a retry of an operation accepted before still
	// attaches to it, under the contract it was accepted with.
	ReasonContractUnavailable = "provider_contract_unavailable"
	// ReasonTenantCredentialMissing: the upstream sends each tenant's
	// requests with that tenant's credential and has none for this one.
	ReasonTenantCredentialMissing = "tenant_credential_missing"
	// ReasonCredentialChanged: the credential the upstream's requests for
	// the operation carry is not the one its last send carried, so a
	// lookup's not_found proves nothing and it is not re-sent.
	ReasonCredentialChanged      = "credential_changed"
	ReasonNoAutomaticResend      = "no_automatic_resend"
	ReasonLookupIndeterminate    = "provider_lookup_indeterminate"
	ReasonLookupNotFoundUnsafe   = "provider_lookup_not_found_without_safe_resend"
	ReasonLookupFailed           = "provider_lookup_error"
	ReasonUpstreamOutcomeUnknown = "upstream_outcome_unknown"
	// ReasonUpstreamInputRequired: the upstream asked for input and the
	// client that started the operation has no way to answer.
	ReasonUpstreamInputRequired = "upstream_input_required"
	// ReasonUpstreamInputLost: the upstream asked for input within a call
	// that the gateway's restart ended, so the question can no longer be
	// answered and the call's outcome is unknown.
	ReasonUpstreamInputLost = "upstream_input_lost_on_restart"
	// ReasonWorkerFailures: the operation's job kept failing, so it waits
	// for a human instead of being retried without end.
	ReasonWorkerFailures = "worker_failed_repeatedly"
	// ReasonSecretUndecryptable: a secret argument's stored value did not
	// decrypt (its key is not configured, or the value was sealed for
	// another operation or changed), so nothing is sent with it.
	ReasonSecretUndecryptable = "secret_arguments_undecryptable"
)

// State is where an operation is in its life. Task statuses shown to MCP
// clients are derived from it with [State.TaskStatus].
type State string

const (
	// StateAwaitingApproval: the call needs an approval it does not have;
	// its approval request waits for an approver, and nothing is reserved,
	// queued or sent until one approves.
	StateAwaitingApproval State = "awaiting_approval"
	StateAccepted         State = "accepted" // committed; dispatch queued
	StateSending          State = "sending"  // "send started" is durable; no remote job bound yet
	StateRunning          State = "running"  // a remote job is bound and not finished
	StateReview           State = "review"   // require_review: nothing is re-sent until a human resolves it
	// StateInputRequired: the upstream asked a question the client is to
	// answer; the operation's InputRequests hold it, and nothing is sent
	// until the answer is recorded.
	StateInputRequired State = "input_required"
	StateCompleted     State = "completed" // the result is stored
	StateFailed        State = "failed"    // the error is stored; no automatic re-run
	StateCancelled     State = "cancelled" // cancellation was requested and the task ended there
)

// Terminal reports whether no further transition may happen.
func (s State) Terminal() bool {
	return s == StateCompleted || s == StateFailed || s == StateCancelled
}

// TaskStatus maps the state to the MCP task status both protocol eras share.
func (s State) TaskStatus() string {
	switch s {
	case StateCompleted, StateFailed, StateCancelled, StateInputRequired:
		return string(s)
	default:
		return "working"
	}
}

// ClientResult is what the client of one attempt got.
type ClientResult string

const (
	ClientUnknown      ClientResult = "unknown"
	ClientDelivered    ClientResult = "delivered"
	ClientDisconnected ClientResult = "disconnected" // client gone before the response was written
	ClientTimedOut     ClientResult = "timed_out"    // the bounded wait elapsed before a result existed
)

// Knowledge is a three-valued fact about the remote side.
type Knowledge string

const (
	Unknown Knowledge = "unknown"
	Yes     Knowledge = "yes"
	No      Knowledge = "no"
)

// Operation is one logical piece of work the user intended, unique per
// (Tenant, OperationID).
type Operation struct {
	ID            int64
	Tenant        string
	OperationID   string
	TaskID        string
	Upstream      string
	Tool          string
	Fingerprint   string
	Arguments     json.RawMessage
	State         State
	StatusMessage string
	ReviewReason  string
	// Result is the upstream's CallToolResult JSON once completed.
	Result json.RawMessage
	// Error is the JSON-RPC error object once failed.
	Error              json.RawMessage
	ApprovalID         int64 // 0 when the operation runs without an approval
	RetryPolicy        RetryPolicy
	Estimate           money.Amount
	IntendedRemoteJobs int
	SendCount          int
	CostBreach         bool
	TTL                time.Duration // 0 means unlimited
	// Priced and SecretArguments are what the tool's policy said when the
	// operation was accepted; see AcceptParams.
	Priced          bool
	SecretArguments []string
	// SecretsAtRest says how Arguments keep the secret arguments' values:
	// sealed values must be opened with the secrets key ring before they
	// are sent anywhere.
	SecretsAtRest SecretsAtRest
	// InputChannel is how the client that started the operation can
	// answer a question the upstream asks during it.
	InputChannel InputChannel
	// InputRequests are the upstream's outstanding questions while the
	// operation is input_required (a JSON object of {method, params} keyed
	// by the upstream's keys); RequestState is the upstream's opaque state
	// of that round, returned to it untouched. InputResponses are the
	// answers recorded for the next round's send, or, on a running
	// operation, for the upstream task that asked, until they reach it.
	InputRequests     json.RawMessage
	RequestState      string
	InputResponses    json.RawMessage
	CancelRequestedAt time.Time
	LeaseOwner        string
	LeaseUntil        time.Time
	CreatedAt         time.Time
	UpdatedAt         time.Time
	EndedAt           time.Time
	// ChainHead is the hash of the operation's latest event (hex SHA-256),
	// the head of its hash chain; receipts are signed over it.
	ChainHead string
	// StoredProviderKey is the provider key drawn when the operation was
	// accepted (NewProviderKey); empty for an operation accepted before
	// ledger schema 14, whose key is derived (see ProviderKey).
	StoredProviderKey string
	// Contract is the declared provider contract, as JSON, the operation
	// was accepted under; nil when the contract is the configuration's. An
	// operation keeps this contract for its whole life, whatever the
	// provider declares later; it is stored byte for byte as accepted.
	Contract json.RawMessage
}

// ProviderKey is the idempotency key the provider receives for this
// operation, and the one every lookup, fetch, charge and cancel sends. It
// is never the caller's raw operation ID: two tenants may choose the same
// operation ID, and an operation ID may be reused once its retention has
// passed, but neither may ever meet the other's job at the provider. It
// is the random key stored at acceptance, which no tenant can compute for
// another; an operation accepted before there was one keeps the key it was
// sent with, an unkeyed hash of tenant, operation ID and row.
func (o *Operation) ProviderKey() string {
	if o.StoredProviderKey != "" {
		return o.StoredProviderKey
	}
	h := sha256.Sum256([]byte(o.Tenant + "\x00" + o.OperationID + "\x00" + strconv.FormatInt(o.ID, 10)))
	return "taskgate-" + idEncoding.EncodeToString(h[:20])
}

// SecretScope is the identity the operation's sealed secret values are
// bound to. The task ID, unguessable and fixed at acceptance, tells apart
// two operations that reuse one operation ID after its retention.
func (o *Operation) SecretScope() secrets.Scope {
	return secrets.Scope{Tenant: o.Tenant, OperationID: o.OperationID, TaskID: o.TaskID}
}

// Attempt is one network request that tried to obtain an operation.
type Attempt struct {
	ID          int64
	RequestID   string
	Tenant      string
	OperationID string
	// OperationRef is the row ID of the operation the attempt resolved to;
	// 0 for a denial that named no existing operation.
	OperationRef int64
	// RelatedRef points a denied retry under a new operation ID at the
	// operation it repeats.
	RelatedRef     int64
	Decision       Decision
	Reason         string
	Fingerprint    string
	Source         string
	ClientResult   ClientResult
	RemoteAccepted Knowledge
	RemoteEffect   Knowledge
	ChargeStatus   Knowledge
	// RunID is the run the client named on the call
	// (_meta["dev.taskgate/run-id"]) and SessionID the MCP session it came
	// on; each is empty when there was none. They tell which operations one
	// agent run caused, for its review packet, and never decide anything
	// about the attempt.
	RunID     string
	SessionID string
	// TraceParent is the W3C traceparent of the span that served the
	// attempt; empty when tracing was off. Like RunID, it decides nothing.
	TraceParent string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// TraceID is the trace ID in TraceParent (version-traceid-spanid-flags,
// as W3C Trace Context writes it), "" when there is none.
func (a *Attempt) TraceID() string {
	p := strings.Split(a.TraceParent, "-")
	if len(p) != 4 || len(p[1]) != 32 || strings.Trim(p[1], "0123456789abcdef") != "" {
		return ""
	}
	return p[1]
}

// JobStatus is what is known of a remote job.
type JobStatus string

const (
	JobAccepted  JobStatus = "accepted"
	JobRunning   JobStatus = "running"
	JobCompleted JobStatus = "completed"
	JobFailed    JobStatus = "failed"
	JobCancelled JobStatus = "cancelled"
	JobUnknown   JobStatus = "unknown"
)

// Terminal reports whether the job can no longer change.
func (s JobStatus) Terminal() bool {
	return s == JobCompleted || s == JobFailed || s == JobCancelled
}

// RemoteJob is a provider-side job an operation caused.
type RemoteJob struct {
	ID           int64
	OperationRef int64
	AttemptRef   int64
	Upstream     string
	// Endpoint is where the job lives (the upstream's URL or command), so a
	// job ID is never read against the wrong server.
	Endpoint          string
	RemoteJobID       string
	UpstreamTaskID    string // the upstream's MCP task, when the job runs as one
	Kind              RemoteJobKind
	Status            JobStatus
	Intended          bool
	Duplicate         bool
	DuplicateResolved string // "", "cancelled" or "accepted" once a human or the reconciler settled it
	Result            json.RawMessage
	CancelRequestedAt time.Time
	EffectReversed    Knowledge
	CreatedAt         time.Time
	UpdatedAt         time.Time
}

// ChargeStatus is the life of one charge.
type ChargeStatus string

const (
	ChargeEstimated ChargeStatus = "estimated"
	ChargePending   ChargeStatus = "pending"
	ChargeFinal     ChargeStatus = "final"
	ChargeRefunded  ChargeStatus = "refunded"
)

// Charge is a priced effect of a remote job.
type Charge struct {
	ID               int64
	OperationRef     int64
	RemoteJobRef     int64
	ProviderChargeID string
	Amount           money.Amount
	Status           ChargeStatus
	Source           string
	// Kind is what the provider calls the charge (a nested service it
	// passes on, say); empty when it names none.
	Kind      string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Approval is what a human approved for one operation ID and tool.
type Approval struct {
	ID          int64
	Tenant      string
	OperationID string
	// Tool is qualified by its upstream's name: "hosted_test.run_suite".
	Tool          string
	MaxTotalCost  money.Amount
	MaxRemoteJobs int
	RetryPolicy   RetryPolicy
	ExpiresAt     time.Time
	CreatedAt     time.Time
	RevokedAt     time.Time
	CreatedBy     string
}

// Active reports whether the approval covers new work at now.
func (a *Approval) Active(now time.Time) bool {
	return a.RevokedAt.IsZero() && now.Before(a.ExpiresAt)
}

// ReservationStatus is the life of a spend reservation.
type ReservationStatus string

const (
	ReservationHeld     ReservationStatus = "held"
	ReservationSettled  ReservationStatus = "settled"
	ReservationReleased ReservationStatus = "released"
)

// Reservation holds an estimated cost and remote jobs against an approval
// until charges settle it or the job definitely did not start.
type Reservation struct {
	ID           int64
	ApprovalRef  int64
	OperationRef int64
	Amount       money.Amount
	Settled      money.Amount
	RemoteJobs   int
	Status       ReservationStatus
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// APIKey is a tenant's bearer credential. Only its SHA-256 hash is stored.
// Role is RoleAgent or RoleApprover; empty means RoleAgent.
type APIKey struct {
	ID        int64
	Tenant    string
	Hash      string
	Label     string
	Role      string
	CreatedAt time.Time
	RevokedAt time.Time
}

// API key roles. An agent key calls tools; an approver key may also create
// and revoke approvals, which an agent must never be able to do for itself.
const (
	RoleAgent    = "agent"
	RoleApprover = "approver"
)

// ApprovalRequestStatus is where an approval request is in its life. Its
// values are stable strings: the API, the command line and receipts spell
// them the same way.
type ApprovalRequestStatus string

const (
	// RequestPending: no approver has decided yet.
	RequestPending ApprovalRequestStatus = "pending"
	// RequestApproved: an approver approved it; ApprovalRef is the approval.
	RequestApproved ApprovalRequestStatus = "approved"
	// RequestDeclined: an approver declined it; nothing was started.
	RequestDeclined ApprovalRequestStatus = "declined"
	// RequestExpired: nobody decided before ExpiresAt; nothing was started.
	RequestExpired ApprovalRequestStatus = "expired"
	// RequestCancelled: the waiting operation was cancelled first.
	RequestCancelled ApprovalRequestStatus = "cancelled"
)

// Valid reports whether s is a status this version knows.
func (s ApprovalRequestStatus) Valid() bool {
	switch s {
	case RequestPending, RequestApproved, RequestDeclined, RequestExpired, RequestCancelled:
		return true
	}
	return false
}

// ApprovalRequest is a consequential call waiting for a human's approval.
// It holds what an approver needs to decide: the call's tool, its
// arguments with the values of secret arguments redacted (never the
// values themselves), its fingerprint and its priced route. Exactly one
// decision is ever recorded for it.
type ApprovalRequest struct {
	ID          int64
	Tenant      string
	OperationID string
	// OperationRef is the operation waiting for the approval; 0 for the
	// request of a client that cannot take a task, which retries the call
	// once it is approved.
	OperationRef int64
	// Tool is qualified by its upstream: "hosted_test.run_suite".
	Tool        string
	Arguments   json.RawMessage
	Fingerprint string
	// Estimate and RemoteJobs are the call's route: approving reserves
	// all of it against the new approval.
	Estimate   money.Amount
	RemoteJobs int
	// RequestedBy is the credential ID of the caller ("api_key:7",
	// "jwt:<subject>"); DecidedBy the approver's, empty for an expiry.
	RequestedBy string
	Status      ApprovalRequestStatus
	CreatedAt   time.Time
	ExpiresAt   time.Time
	DecidedAt   time.Time
	DecidedBy   string
	Note        string
	// ApprovalRef is the approval an approver gave; 0 until approved.
	ApprovalRef int64
}

// ApprovalQuestion is one question the gateway asked a client for an
// approval. Only an answer that names an outstanding question, asked of the
// same tenant about the same operation, tool and arguments, may approve; the
// question is taken when answered, so an answer counts once.
type ApprovalQuestion struct {
	ID int64
	// Nonce is the unguessable value the client echoes back with its answer.
	Nonce       string
	Tenant      string
	OperationID string
	// Tool is qualified by its upstream: "hosted_test.run_suite".
	Tool        string
	Fingerprint string
	// Estimate is the cost the question named.
	Estimate   money.Amount
	CreatedAt  time.Time
	ExpiresAt  time.Time
	AnsweredAt time.Time // zero while outstanding
}
