package receipt

import (
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
)

// Currency is the currency receipts reckon in.
const Currency = "USD"

// DefaultInvoiceGrace is how long after a priced remote job completes its
// invoice may take before the receipt sets a due time to chase it.
const DefaultInvoiceGrace = 24 * time.Hour

// Input is everything the receipt is computed from.
type Input struct {
	// Operation must not be nil.
	Operation *ledger.Operation
	// Attempts are the operation's attempts plus denied retries that point
	// at it (RelatedRef), as ledger.Store.AttemptList returns them, and
	// the attempts of its operation ID refused while ApprovalRequest
	// waited, which point at none (ledger.Store.AttemptListRefused).
	Attempts   []*ledger.Attempt
	RemoteJobs []*ledger.RemoteJob
	Charges    []*ledger.Charge
	// Approval is the approval the operation ran under; nil when none.
	Approval *ledger.Approval
	// Budgets are the budgets that covered the operation, and
	// BudgetReservations what it holds against each (by BudgetRef).
	Budgets            []*ledger.Budget
	BudgetReservations []*ledger.BudgetReservation
	// ApprovalRequest is the request an approver approved to give
	// Approval; nil when the approval came another way. Without it the
	// receipt reads the request from the operation's events, where an
	// operation that waited for its request records it.
	ApprovalRequest *ledger.ApprovalRequest
	// Reservations are this operation's reservations against Approval.
	Reservations []*ledger.Reservation
	Events       []*ledger.Event
	// Priced says the tool's provider contract prices it: a completed job
	// without a final (or refunded) charge is then missing an invoice.
	Priced bool
	// Owner is who follows up next actions such as a late invoice; empty
	// means the operation's tenant.
	Owner string
	// InvoiceGrace is how long after completion a priced job's invoice is
	// due; zero means DefaultInvoiceGrace.
	InvoiceGrace time.Duration
	// Now is when the receipt is generated; zero omits generated_at.
	Now time.Time
}

// Money is an amount as receipts print it: a plain decimal YAML number, a
// decimal JSON string, never a float.
type Money struct{ money.Amount }

// MarshalYAML prints the amount as a plain decimal scalar ("17.84").
func (m Money) MarshalYAML() (any, error) {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: m.String()}, nil
}

func usd(micros int64) Money { return Money{money.FromMicros(micros, Currency)} }

// Receipt is the reconciled account of one operation. Field order is the
// order of every rendering; the first twelve fields are the receipt's headline figures (docs/operations.md, "Receipts").
type Receipt struct {
	OperationID          string               `json:"operation_id" yaml:"operation_id"`
	IntendedRemoteJobs   int                  `json:"intended_remote_jobs" yaml:"intended_remote_jobs"`
	Attempts             int                  `json:"attempts" yaml:"attempts"`
	ObservedRemoteJobs   int                  `json:"observed_remote_jobs" yaml:"observed_remote_jobs"`
	AttachedAttempts     int                  `json:"attached_attempts" yaml:"attached_attempts"`
	DuplicateJobs        int                  `json:"duplicate_jobs" yaml:"duplicate_jobs"`
	EstimatedCostUSD     Money                `json:"estimated_cost_usd" yaml:"estimated_cost_usd"`
	FinalCostUSD         Money                `json:"final_cost_usd" yaml:"final_cost_usd"`
	UnpricedAttempts     int                  `json:"unpriced_attempts" yaml:"unpriced_attempts"`
	ResultUsed           string               `json:"result_used" yaml:"result_used"`
	ReconciliationStatus ReconciliationStatus `json:"reconciliation_status" yaml:"reconciliation_status"`
	ReviewStatus         ReviewStatus         `json:"review_status" yaml:"review_status"`

	Tenant         string `json:"tenant" yaml:"tenant"`
	TaskID         string `json:"task_id" yaml:"task_id"`
	Tool           string `json:"tool" yaml:"tool"` // "upstream.tool"
	State          string `json:"state" yaml:"state"`
	DeniedAttempts int    `json:"denied_attempts" yaml:"denied_attempts"`
	// MissingRemoteJobs counts the intended remote jobs of a call that fans
	// out which the operation completed without; omitted when none.
	MissingRemoteJobs int   `json:"missing_remote_jobs,omitempty" yaml:"missing_remote_jobs,omitempty"`
	PendingCostUSD    Money `json:"pending_cost_usd" yaml:"pending_cost_usd"`
	RefundedCostUSD   Money `json:"refunded_cost_usd" yaml:"refunded_cost_usd"`
	// GeneratedAt is Input.Now.
	GeneratedAt time.Time `json:"generated_at,omitzero" yaml:"generated_at,omitempty"`
	// ChainHead is the head of the operation's event hash chain the
	// receipt was built from; omitted when the ledger records none.
	ChainHead string `json:"chain_head,omitempty" yaml:"chain_head,omitempty"`
	// LastReconciliation is the latest reconciler pass; nil when none ran.
	LastReconciliation *Reconciliation `json:"last_reconciliation,omitempty" yaml:"last_reconciliation,omitempty"`
	// Approval is nil when the operation ran without one.
	Approval *ApprovalTerms `json:"approval,omitempty" yaml:"approval,omitempty"`
	// ApprovalRequest is the request the operation waited on for its
	// approval, and who decided it; nil when it waited on none.
	ApprovalRequest *ApprovalRequestLine `json:"approval_request,omitempty" yaml:"approval_request,omitempty"`
	// Budgets are the budgets that admitted the operation, whose own
	// approval they gave; empty when none did.
	Budgets      []BudgetLine  `json:"budgets,omitempty" yaml:"budgets,omitempty"`
	Breaches     []Breach      `json:"breaches" yaml:"breaches"`
	Lineage      []AttemptLine `json:"lineage" yaml:"lineage"`
	RemoteJobs   []RemoteJob   `json:"remote_jobs" yaml:"remote_jobs"`
	Charges      []Charge      `json:"charges" yaml:"charges"`
	Questions    []Question    `json:"questions,omitempty" yaml:"questions,omitempty"`
	Cancellation *Cancellation `json:"cancellation,omitempty" yaml:"cancellation,omitempty"`
	NextActions  []NextAction  `json:"next_actions" yaml:"next_actions"`
	// Signature is the signature block [Sign] adds; nil on an unsigned
	// receipt, whose renderings then carry none.
	Signature *Signature `json:"signature,omitempty" yaml:"signature,omitempty"`
	// Issue says which issued version this rendering shows; set when a
	// stored version is read back ([Issued]), never part of what was
	// signed.
	Issue *IssueLine `json:"issue,omitempty" yaml:"issue,omitempty"`
	// Provisional marks a receipt built from the ledger because none is
	// issued yet (the operation is still open, or no key could sign): it
	// is unsigned and may change.
	Provisional bool `json:"provisional,omitempty" yaml:"provisional,omitempty"`
}

// IssueLine is what a rendering of an issued receipt says about its
// issue: the version, its digest and the previous version's, and the key
// that signed it.
type IssueLine struct {
	Version  int       `json:"version" yaml:"version"`
	Digest   string    `json:"digest" yaml:"digest"`
	Previous string    `json:"previous,omitempty" yaml:"previous,omitempty"`
	KeyID    string    `json:"kid" yaml:"kid"`
	IssuedAt time.Time `json:"issued_at" yaml:"issued_at"`
}

// Reconciliation is what the latest reconciler pass recorded.
type Reconciliation struct {
	Lookup string    `json:"lookup" yaml:"lookup"`
	Detail string    `json:"detail,omitempty" yaml:"detail,omitempty"`
	At     time.Time `json:"at" yaml:"at"`
}

// ApprovalTerms is the approval an operation ran under and what is left of
// it.
type ApprovalTerms struct {
	ID            int64     `json:"id" yaml:"id"`
	MaxTotalCost  Money     `json:"max_total_cost" yaml:"max_total_cost"`
	MaxRemoteJobs int       `json:"max_remote_jobs" yaml:"max_remote_jobs"`
	RetryPolicy   string    `json:"retry_policy" yaml:"retry_policy"`
	ExpiresAt     time.Time `json:"expires_at" yaml:"expires_at"`
	RevokedAt     time.Time `json:"revoked_at,omitzero" yaml:"revoked_at,omitempty"`
	// ApprovedBy says who gave the approval: an approver's credential ID
	// ("api_key:7", "jwt:<subject>"), or "client_user (unverified)" for an
	// answer to an in-protocol form, which nothing ties to a person
	// ("elicitation" on approvals recorded before the form was capped);
	// empty when the ledger names none.
	ApprovedBy string `json:"approved_by,omitempty" yaml:"approved_by,omitempty"`
	// HeadroomUSD is the ceiling minus the larger of what reservations
	// commit and what final and pending charges add up to; negative once
	// the ceiling is breached.
	HeadroomUSD Money `json:"headroom_usd" yaml:"headroom_usd"`
	// RemoteJobsHeadroom is the job limit minus the larger of reserved and
	// observed remote jobs; negative when more jobs ran than approved.
	RemoteJobsHeadroom int `json:"remote_jobs_headroom" yaml:"remote_jobs_headroom"`
}

// ApprovalRequestLine is the approval request an operation waited on: who
// asked and when, what became of it, the credential ID of the approver who
// approved or declined it and the note they gave.
type ApprovalRequestLine struct {
	ID          int64     `json:"id" yaml:"id"`
	RequestedBy string    `json:"requested_by,omitempty" yaml:"requested_by,omitempty"`
	RequestedAt time.Time `json:"requested_at,omitzero" yaml:"requested_at,omitempty"`
	// Status is pending, approved, declined, expired or cancelled.
	Status     string    `json:"status" yaml:"status"`
	ApprovedBy string    `json:"approved_by,omitempty" yaml:"approved_by,omitempty"`
	DeclinedBy string    `json:"declined_by,omitempty" yaml:"declined_by,omitempty"`
	Note       string    `json:"note,omitempty" yaml:"note,omitempty"`
	DecidedAt  time.Time `json:"decided_at,omitzero" yaml:"decided_at,omitempty"`
}

// BudgetLine is a budget that covered the operation: its scope, its
// period, its ceilings, and what the operation holds against it.
type BudgetLine struct {
	ID            int64    `json:"id" yaml:"id"`
	Tools         []string `json:"tools,omitempty" yaml:"tools,omitempty"`
	ToolPrefix    string   `json:"tool_prefix,omitempty" yaml:"tool_prefix,omitempty"`
	RunID         string   `json:"run_id,omitempty" yaml:"run_id,omitempty"`
	Period        string   `json:"period" yaml:"period"`
	TimeZone      string   `json:"time_zone" yaml:"time_zone"`
	MaxTotalCost  Money    `json:"max_total_cost" yaml:"max_total_cost"`
	MaxRemoteJobs int      `json:"max_remote_jobs" yaml:"max_remote_jobs"`
	// Reserved is what the operation holds or settled against the budget,
	// and Status that reservation's status: held, settled or released.
	Reserved Money  `json:"reserved" yaml:"reserved"`
	Status   string `json:"status" yaml:"status"`
	// Breached says the operation's final cost took the budget over its
	// ceiling.
	Breached bool `json:"breached,omitempty" yaml:"breached,omitempty"`
}

// Breach is a broken approval boundary.
type Breach struct {
	Kind         string `json:"kind" yaml:"kind"`
	FinalCostUSD Money  `json:"final_cost_usd" yaml:"final_cost_usd"`
	// CeilingUSD and OverByUSD are nil when the approval is unknown.
	CeilingUSD *Money `json:"ceiling_usd,omitempty" yaml:"ceiling_usd,omitempty"`
	OverByUSD  *Money `json:"over_by_usd,omitempty" yaml:"over_by_usd,omitempty"`
	// ChargeID is the final charge that crossed the ceiling.
	ChargeID string `json:"charge_id,omitempty" yaml:"charge_id,omitempty"`
	// Open is false once refunds brought the final cost back under the
	// ceiling; the breach stays on record.
	Open bool `json:"open" yaml:"open"`
}

// AttemptLine is one attempt in the lineage.
type AttemptLine struct {
	RequestID      string    `json:"request_id" yaml:"request_id"`
	OperationID    string    `json:"operation_id" yaml:"operation_id"`
	Decision       string    `json:"decision" yaml:"decision"`
	Reason         string    `json:"reason,omitempty" yaml:"reason,omitempty"`
	ClientResult   string    `json:"client_result" yaml:"client_result"`
	RemoteAccepted string    `json:"remote_accepted" yaml:"remote_accepted"`
	RemoteEffect   string    `json:"remote_effect" yaml:"remote_effect"`
	ChargeStatus   string    `json:"charge_status" yaml:"charge_status"`
	At             time.Time `json:"at" yaml:"at"`
	// TraceID is the OpenTelemetry trace the attempt was served in;
	// omitted when tracing was off.
	TraceID string `json:"trace_id,omitempty" yaml:"trace_id,omitempty"`
}

// RemoteJob is one provider-side job of the operation.
type RemoteJob struct {
	RemoteJobID string `json:"remote_job_id" yaml:"remote_job_id"`
	Upstream    string `json:"upstream" yaml:"upstream"`
	// Endpoint is where the job lives, the upstream's URL with its
	// credentials redacted ([inert.URL]) or its command line: a receipt
	// is read with an agent's key, so no rendering may hold a credential.
	Endpoint  string `json:"endpoint" yaml:"endpoint"`
	Kind      string `json:"kind" yaml:"kind"`
	Status    string `json:"status" yaml:"status"`
	Intended  bool   `json:"intended" yaml:"intended"`
	Duplicate bool   `json:"duplicate" yaml:"duplicate"`
	// DuplicateResolved is "open", "cancelled" or "accepted" for a
	// duplicate, empty otherwise.
	DuplicateResolved string    `json:"duplicate_resolved,omitempty" yaml:"duplicate_resolved,omitempty"`
	CompletedAt       time.Time `json:"completed_at,omitzero" yaml:"completed_at,omitempty"`
	CancelRequested   bool      `json:"cancel_requested" yaml:"cancel_requested"`
	CancelRequestedAt time.Time `json:"cancel_requested_at,omitzero" yaml:"cancel_requested_at,omitempty"`
	EffectReversed    string    `json:"effect_reversed" yaml:"effect_reversed"`
	// Evidence is the provider's own latest records of the job that the
	// reconciler saw: its status and its charges, as the provider returned
	// them. Omitted when none was recorded.
	Evidence []Evidence `json:"evidence,omitempty" yaml:"evidence,omitempty"`
}

// Evidence is one record of the provider's about a remote job, as it
// returned it.
type Evidence struct {
	// Record is "status" or "charges".
	Record string `json:"record" yaml:"record"`
	// Tool is the contract tool (or MCP method) that answered.
	Tool string `json:"tool" yaml:"tool"`
	// Answer is the provider's answer as JSON text, numbers exactly as it
	// wrote them; a very long one is named by its digest.
	Answer string    `json:"answer" yaml:"answer"`
	SeenAt time.Time `json:"seen_at" yaml:"seen_at"`
}

// Charge is one priced effect of a remote job.
type Charge struct {
	ChargeID string `json:"charge_id" yaml:"charge_id"`
	// RemoteJobID is the provider's ID of the job charged; empty when the
	// charge names no job.
	RemoteJobID string `json:"remote_job_id" yaml:"remote_job_id"`
	Amount      Money  `json:"amount" yaml:"amount"`
	Currency    string `json:"currency" yaml:"currency"`
	Status      string `json:"status" yaml:"status"`
	// Kind is what the provider calls the charge, such as a nested paid
	// service; omitted when it names none. Every kind counts in the totals.
	Kind string `json:"kind,omitempty" yaml:"kind,omitempty"`
}

// QuestionAnswer is what became of a question the upstream asked.
type QuestionAnswer string

const (
	QuestionAnswered   QuestionAnswer = "answered"
	QuestionDeclined   QuestionAnswer = "declined"
	QuestionUnanswered QuestionAnswer = "unanswered"
)

// Question is one question the upstream asked in answer to the operation's
// Send'th send, by the keys it gave its requests. A receipt lists them in
// order and omits the list when the upstream asked none.
type Question struct {
	Send    int            `json:"send" yaml:"send"`
	Keys    []string       `json:"keys" yaml:"keys"`
	AskedAt time.Time      `json:"asked_at" yaml:"asked_at"`
	Answer  QuestionAnswer `json:"answer" yaml:"answer"`
	// Action is the client's elicitation action (accept, decline,
	// cancel) when it gave one.
	Action     string    `json:"action,omitempty" yaml:"action,omitempty"`
	AnsweredAt time.Time `json:"answered_at,omitzero" yaml:"answered_at,omitempty"`
}

// Cancellation keeps apart what are separate facts: the
// client stopped watching, cancellation was requested, the effect was
// reversed.
type Cancellation struct {
	ClientStoppedWatching   bool      `json:"client_stopped_watching" yaml:"client_stopped_watching"`
	ClientStoppedWatchingAt time.Time `json:"client_stopped_watching_at,omitzero" yaml:"client_stopped_watching_at,omitempty"`
	CancellationRequested   bool      `json:"cancellation_requested" yaml:"cancellation_requested"`
	CancellationRequestedAt time.Time `json:"cancellation_requested_at,omitzero" yaml:"cancellation_requested_at,omitempty"`
	// RequestedAfterEffect: cancellation came at or after a job completed,
	// or the effect was recorded as not reversed.
	RequestedAfterEffect bool `json:"requested_after_effect" yaml:"requested_after_effect"`
	// EffectReversed is "yes", "no" or "unknown"; empty when nothing was
	// cancelled and no reversal was recorded.
	EffectReversed string `json:"effect_reversed,omitempty" yaml:"effect_reversed,omitempty"`
	// KeptByPolicy names the tool's client_cancel policy ("before_send")
	// when the client asked to cancel after the call was sent and the
	// policy kept the job running to its end; empty otherwise.
	KeptByPolicy string `json:"kept_by_policy,omitempty" yaml:"kept_by_policy,omitempty"`
}

// NextAction is one concrete thing someone must do before the operation is
// settled.
type NextAction struct {
	Action string    `json:"action" yaml:"action"`
	Target string    `json:"target" yaml:"target"`
	Reason string    `json:"reason" yaml:"reason"`
	Owner  string    `json:"owner,omitempty" yaml:"owner,omitempty"`
	Due    time.Time `json:"due,omitzero" yaml:"due,omitempty"`
}
