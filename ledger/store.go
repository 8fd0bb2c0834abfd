package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/taskgate/taskgate/money"
)

// Errors every Store returns (wrapped) so callers can use errors.Is without
// knowing the database underneath.
var (
	ErrNotFound = errors.New("not found")
	ErrClosed   = errors.New("ledger store is closed")
	// ErrLeaseHeld means another worker holds the operation's lease.
	ErrLeaseHeld = errors.New("operation lease is held by another worker")
	// ErrStateChanged means an operation was no longer in the state a
	// transition expected; the caller should reload and decide again.
	ErrStateChanged = errors.New("operation state changed concurrently")
	// ErrIllegalTransition means a transition asked for a move of state
	// that [State.CanBecome] does not allow. A move out of an ended state
	// is ErrStateChanged as well: the operation ended under the caller.
	ErrIllegalTransition = errors.New("illegal operation state transition")
	// ErrCancelRequested means a transition that records the first
	// request to cancel an operation (CancelOnce) found one recorded
	// already: the cancellation is under way, and nothing was written.
	ErrCancelRequested = errors.New("cancellation of the operation was already requested")
	// ErrRequestDecided means an approval request was decided (approved,
	// declined, expired or cancelled) before this decision: exactly one is
	// ever recorded. The wrapping error names what it was.
	ErrRequestDecided = errors.New("the approval request was already decided")
	// ErrApprovalShort means the terms an approver gave do not cover the
	// request's route (its estimate or its remote jobs); nothing changed.
	ErrApprovalShort = errors.New("the approval does not cover the request")
	// ErrSchemaNewer means a newer binary has migrated the ledger past the
	// schema this binary knows; it must not write to it.
	ErrSchemaNewer = errors.New("the ledger's schema is newer than this taskgate")
	// ErrBackupUnsupported means the store is not backed up through
	// taskgate but with its database's own tools.
	ErrBackupUnsupported = errors.New("this ledger is not backed up by taskgate")
)

// Store is the durable ledger. Every method is one transaction: it either
// commits entirely or changes nothing. Implementations are safe for
// concurrent use by many goroutines and, through the database's constraints,
// by several processes sharing one database.
type Store interface {
	// Accept decides one attempt per the acceptance table and
	// commits the attempt, and for a created operation the operation row,
	// its reservation and its jobs, in one transaction before returning.
	Accept(ctx context.Context, p *AcceptParams) (*AcceptResult, error)

	// AttemptRecord records an attempt denied before acceptance (no
	// operation ID, bad input); it consumes no operation ID.
	AttemptRecord(ctx context.Context, p *AttemptRecordParams) (*Attempt, error)
	// AttemptSetClientResult records what the client of an attempt got.
	AttemptSetClientResult(ctx context.Context, requestID string, r ClientResult) error
	// AttemptList lists the attempts of an operation, including denied
	// retries that point at it, oldest first.
	AttemptList(ctx context.Context, operationRef int64) ([]*Attempt, error)
	// AttemptListRefused lists the denied attempts that point at no
	// operation and that p selects, oldest first: the calls of a client
	// that cannot take a task, refused while their approval request
	// waited, before the approved retry created the operation.
	AttemptListRefused(ctx context.Context, p *RefusedAttemptListParams) ([]*Attempt, error)

	// LeaseClaim makes owner the operation's worker until until, unless
	// another owner's lease has not lapsed (ErrLeaseHeld).
	LeaseClaim(ctx context.Context, operationRef int64, owner string, until time.Time) (*Operation, error)
	// LeaseExtend is a worker's heartbeat; ErrLeaseHeld if it lost the lease.
	LeaseExtend(ctx context.Context, operationRef int64, owner string, until time.Time) error
	// Transition applies one atomic change. It fails, changing nothing,
	// with ErrStateChanged when the operation is not in a From state or
	// its lease did not lapse, ErrLeaseHeld when Owner does not hold the
	// lease, and ErrIllegalTransition when [State.CanBecome] forbids the
	// move to To; a move out of an ended state is both ErrStateChanged and
	// ErrIllegalTransition.
	Transition(ctx context.Context, p *TransitionParams) (*Operation, error)
	// OperationsToRecover lists unfinished operations whose lease lapsed
	// before now: their worker died or their job was lost.
	OperationsToRecover(ctx context.Context, now time.Time, limit int) ([]*Operation, error)
	// OperationsEndedBefore lists ended operations whose operation ID is
	// still reserved and that ended before t.
	OperationsEndedBefore(ctx context.Context, t time.Time, limit int) ([]*Operation, error)

	// OperationsToArchive lists ended operations that p selects, oldest
	// row first, with their chain heads.
	OperationsToArchive(ctx context.Context, p *ArchiveListParams) ([]*Operation, error)
	// OperationsPrune deletes, in one transaction, each tombstone's
	// operation with everything it owns (attempts, events, remote jobs,
	// charges, reservations, approval requests, receipt versions) and
	// records the tombstone. An operation that is not ended, or whose
	// chain head is no longer the tombstone's, makes it change nothing
	// and return ErrStateChanged: it moved on after it was archived.
	OperationsPrune(ctx context.Context, tombstones []*Tombstone) error
	// TombstoneList lists the tombstones of a tenant's operation ID,
	// oldest first.
	TombstoneList(ctx context.Context, tenant, operationID string) ([]*Tombstone, error)
	// TombstonesExpire deletes at most limit tombstones whose operation
	// ID was released before before (KeyUntil), and returns how many: the
	// archive keeps the operation, and its ID is free again either way.
	TombstonesExpire(ctx context.Context, before time.Time, limit int) (int, error)

	// SecretsReseal seals, under the newest key of the store's secrets key
	// ring, the secret argument values that operations still hold in plain
	// text (accepted before a key was configured) and, with p.Rotate,
	// those sealed under an older key; each operation in a transaction of
	// its own. A store without a ring changes nothing. Either way it
	// reports what the ledger holds.
	SecretsReseal(ctx context.Context, p *SecretsResealParams) (*SecretsReport, error)

	// OperationGet loads one operation; ErrNotFound if none matches.
	OperationGet(ctx context.Context, p *OperationGetParams) (*Operation, error)
	// OperationCount counts operations in the given states.
	OperationCount(ctx context.Context, states []State) (int, error)
	// OperationList lists operations, newest first.
	OperationList(ctx context.Context, p *OperationListParams) ([]*Operation, error)

	// RemoteJobList lists an operation's remote jobs, oldest first.
	RemoteJobList(ctx context.Context, operationRef int64) ([]*RemoteJob, error)
	// ChargeList lists an operation's charges, oldest first.
	ChargeList(ctx context.Context, operationRef int64) ([]*Charge, error)

	// EventList lists an operation's events, oldest first.
	EventList(ctx context.Context, operationRef int64) ([]*Event, error)
	// ChainList reads the hash chains of the operations p selects, oldest
	// operation first, for [Chain.Check]: each operation's head and its
	// events, with their stored hashes, in one read, so that a chain
	// appended to meanwhile is seen before or after the append, never
	// half of it.
	ChainList(ctx context.Context, p *ChainListParams) ([]*Chain, error)

	// Approvals.
	ApprovalCreate(ctx context.Context, a *Approval) (*Approval, error)
	ApprovalList(ctx context.Context, p *ApprovalListParams) ([]*Approval, error)
	// ApprovalGet loads one approval by row ID; ErrNotFound if none.
	ApprovalGet(ctx context.Context, id int64) (*Approval, error)
	ApprovalRevoke(ctx context.Context, tenant string, id int64, now time.Time) (*Approval, error)
	ReservationList(ctx context.Context, approvalRef int64) ([]*Reservation, error)

	// Budgets. BudgetCreate records a budget and a budget_created event
	// naming its CreatedBy; terms that policy.CheckBudget refuses are an error.
	// BudgetGet loads one of the tenant's budgets (ErrNotFound for another
	// tenant's, as for none). BudgetClose closes one with an event naming
	// by: it covers no new call, and what it holds stays reserved until
	// settled; closing it again changes nothing.
	BudgetCreate(ctx context.Context, b *Budget) (*Budget, error)
	BudgetList(ctx context.Context, p *BudgetListParams) ([]*Budget, error)
	BudgetGet(ctx context.Context, tenant string, id int64) (*Budget, error)
	BudgetClose(ctx context.Context, tenant string, id int64, by string, now time.Time) (*Budget, error)
	// BudgetReservationList lists the reservations against one budget,
	// oldest first, or those of one operation, by budget.
	BudgetReservationList(ctx context.Context, p *BudgetReservationListParams) ([]*BudgetReservation, error)
	// BudgetEventList lists a budget's events, oldest first.
	BudgetEventList(ctx context.Context, budgetRef int64) ([]*BudgetEvent, error)

	// ApprovalQuestionCreate records a question asked for an approval. The
	// caller chooses an unguessable Nonce; it must be unique.
	ApprovalQuestionCreate(ctx context.Context, q *ApprovalQuestion) (*ApprovalQuestion, error)
	// ApprovalQuestionTake marks answered, exactly once, the outstanding
	// question whose nonce, tenant, operation ID, tool and fingerprint are
	// p's and that has not expired at p.Now, and returns it. Of concurrent
	// takes of one question, one succeeds; the others, and a take of an
	// unknown, expired, answered or mismatched question, get ErrNotFound.
	ApprovalQuestionTake(ctx context.Context, p *ApprovalQuestionTakeParams) (*ApprovalQuestion, error)

	// Approval requests. ApprovalRequestList lists a tenant's requests,
	// newest first; ApprovalRequestGet loads one of the tenant's
	// (ErrNotFound for another tenant's, as for none).
	ApprovalRequestList(ctx context.Context, p *ApprovalRequestListParams) ([]*ApprovalRequest, error)
	ApprovalRequestGet(ctx context.Context, tenant string, id int64) (*ApprovalRequest, error)
	// ApprovalRequestDecide records the one decision of a pending request
	// in one transaction: approving creates the approval, reserves the
	// request's route against it and queues the waiting operation;
	// declining or expiring ends it failed with nothing started. Of
	// concurrent decisions exactly one succeeds; the others get
	// ErrRequestDecided. Terms short of the route get ErrApprovalShort, a
	// decision of a request that has expired (or, for an expiry, has not)
	// ErrRequestDecided, both changing nothing.
	ApprovalRequestDecide(ctx context.Context, p *ApprovalRequestDecision) (*ApprovalRequestDecided, error)

	// API keys: stored as SHA-256 hashes, never in the clear.
	KeyCreate(ctx context.Context, k *APIKey) (*APIKey, error)
	// KeyByHash returns the unrevoked key with this hash; ErrNotFound if none.
	KeyByHash(ctx context.Context, hash string) (*APIKey, error)
	KeyList(ctx context.Context, tenant string) ([]*APIKey, error)
	KeyRevoke(ctx context.Context, id int64, now time.Time) error

	// Receipt signing keys: public keys, and private keys only sealed.
	// SigningKeyCreate records a new active key; a key ID already recorded
	// is refused.
	SigningKeyCreate(ctx context.Context, k *SigningKey) (*SigningKey, error)
	// SigningKeyList lists every signing key, retired ones too, oldest
	// first.
	SigningKeyList(ctx context.Context) ([]*SigningKey, error)
	// SigningKeyRetire retires the key with this key ID and erases its
	// sealed private key; a key retired before keeps its first retirement
	// time. ErrNotFound if there is no such key.
	SigningKeyRetire(ctx context.Context, keyID string, now time.Time) (*SigningKey, error)

	// Issued receipts: signed documents, each stored once.
	// ReceiptIssue records v as the next version of its operation's
	// receipt: v.Version is one more than the latest version's (1 when
	// there is none) and v.Previous the latest version's digest. When
	// either no longer holds (another issue got there first) it records
	// nothing and returns ErrReceiptVersionTaken.
	ReceiptIssue(ctx context.Context, v *ReceiptVersion) (*ReceiptVersion, error)
	// ReceiptVersions lists the operation's issued receipts, oldest
	// first; none for an operation whose receipt was never issued.
	ReceiptVersions(ctx context.Context, operationRef int64) ([]*ReceiptVersion, error)

	// Console sessions: a sign-in that ended before its time (signed out)
	// is recorded until expires, the time it would have ended, so that no
	// replica accepts its sealed cookie again. ConsoleSessionEnd also
	// deletes the records whose time has passed at now; ending a session
	// twice keeps the first record.
	ConsoleSessionEnd(ctx context.Context, id string, expires, now time.Time) error
	// ConsoleSessionEnded reports whether session id was ended.
	ConsoleSessionEnded(ctx context.Context, id string) (bool, error)

	// NewJobClient returns a River client on the store's database, for
	// working the jobs that the store's transactions enqueue.
	NewJobClient(config *river.Config) (JobClient, error)

	// Migrate applies pending schema migrations (taskgate's and River's).
	Migrate(ctx context.Context) error
	// Dialect names the database: "sqlite" or "postgres".
	Dialect() string
	// Backup writes a consistent copy of the ledger, taken while it
	// serves, to the new file path (an existing file is refused), syncs it
	// to disk and checks the copy before it returns. A store whose
	// database is backed up with that database's own tools returns
	// ErrBackupUnsupported, wrapped in a sentence naming them.
	Backup(ctx context.Context, path string) (*Backup, error)
	// Close releases the store's connections; pending Accept calls fail
	// with ErrClosed.
	Close() error
}

// Backup describes a checked copy of the ledger.
type Backup struct {
	// Path is the copy's file.
	Path string
	// Bytes is the copy's size.
	Bytes int64
	// SchemaVersion is the ledger migration the copy is at: a gateway
	// that knows it can serve the copy.
	SchemaVersion int64
}

// SecretsResealParams say what SecretsReseal seals anew.
type SecretsResealParams struct {
	// Rotate reseals values sealed under an older key too. Only once every
	// gateway on the ledger has the newest key may it run: one without it
	// cannot open what is resealed.
	Rotate bool
}

// SecretsReport is what the ledger holds of secret argument values: the
// operations that hold them in plain text, and by key ID those that hold
// them sealed. Resealed counts the operations SecretsReseal sealed anew,
// Undecryptable those whose values it could not open (left as they are).
type SecretsReport struct {
	Plaintext     int
	Sealed        map[string]int
	Resealed      int
	Undecryptable int
}

// ApprovalRequirement tells Accept how the tool's policy treats approvals,
// and the call's route: what it would start, priced before it is sent.
type ApprovalRequirement struct {
	// Required means a created operation must fall under an active approval
	// for (tenant, operation ID, tool), or repeat the arguments of an
	// operation that does.
	Required bool
	// Estimate is the route's estimated total, stored on the operation and
	// reserved against the approval's ceiling.
	Estimate money.Amount
	// RemoteJobs is how many remote jobs the call fans out to: the
	// operation's intended remote jobs, reserved against the approval's
	// limit. Zero means one.
	RemoteJobs int
	// Request says what a call without any approval leaves behind (see
	// [RequestMode]); RequestTTL is how long its approval request waits
	// for an approver, and RequestedBy is the caller's credential ID.
	Request     RequestMode
	RequestTTL  time.Duration
	RequestedBy string
	// NoBudgets says the tool's policy wants a person for every call:
	// budgets never cover it (configuration's budgets: false). Otherwise a
	// call without an approval of its own is admitted when the budgets
	// its scope matches all have room for its route.
	NoBudgets bool
}

// Jobs is the route's remote jobs: RemoteJobs, or one when it is unset.
func (r ApprovalRequirement) Jobs() int { return max(r.RemoteJobs, 1) }

// AcceptParams are the inputs of one acceptance.
type AcceptParams struct {
	Tenant      string
	OperationID string
	Upstream    string
	Tool        string
	Fingerprint string
	Arguments   json.RawMessage
	// KeyArgument is the argument in which the tool's provider contract
	// passes the provider's key, left out of Arguments and Fingerprint;
	// empty for none. It lets a retry of an operation accepted while the
	// argument still counted attach ([DecideKeyed]).
	KeyArgument string
	// RequestID identifies this attempt; it must be unique.
	RequestID string
	// TaskID is the unguessable handle to give a created operation.
	TaskID string
	// Source says how the attempt arrived, e.g. "mcp/2026-07-28" or "cli".
	Source string
	// RunID and SessionID are recorded on the attempt (see
	// [Attempt.RunID]); they take no part in the decision.
	RunID     string
	SessionID string
	// TraceParent is recorded on the attempt ([Attempt.TraceParent]).
	TraceParent string
	RetryPolicy RetryPolicy
	TTL         time.Duration
	Approval    ApprovalRequirement
	// Enqueue returns the work for the job queue (River) to insert in the same transaction
	// when the decision is created. It may be nil. They are inserted on
	// River's fast path, which has no unique-job handling: a job with
	// unique options that conflicts fails the acceptance.
	Enqueue func(op *Operation) []river.InsertManyParams
	// Priced records that the tool's provider contract reads charges, so
	// that a completed job without an invoice is noticed.
	Priced bool
	// Contract is the declared provider contract, as JSON, the operation
	// was accepted under; nil when the contract is the configuration's. It
	// is kept byte for byte on a created operation ([Operation.Contract])
	// and must be valid JSON; an attached attempt never changes it.
	Contract json.RawMessage
	// SecretArguments names arguments that displays of the operation must
	// redact. The ledger keeps them, because a recovery may need to
	// re-send, sealed under the store's secrets key ring when it has one
	// (see [SecretsAtRest]); Arguments are given in plain text and the
	// fingerprint covers the real values.
	SecretArguments []string
	// InputChannel is how the client can answer a question the upstream
	// asks during the operation.
	InputChannel InputChannel
	// QueueLease, with Jobs, marks the operation as held by its queued
	// job for this long; if no worker claims it by then, recovery does.
	QueueLease time.Duration
	// Now is the acceptance time; zero means the store's clock.
	Now time.Time
}

// QualifiedTool is the tool as approvals name it: "upstream.tool".
func (p *AcceptParams) QualifiedTool() string { return p.Upstream + "." + p.Tool }

// AcceptResult is what Accept decided and recorded.
type AcceptResult struct {
	Decision Decision
	Reason   string
	// Message explains a denial for a human or a model.
	Message string
	// Operation is the created or stored operation; nil for a denial that
	// named no existing operation.
	Operation *Operation
	Attempt   *Attempt
	// Request is the approval request the call waits on (a created
	// operation awaiting_approval) or that names what a human must approve
	// (a denial for RequestRecord); nil otherwise.
	Request *ApprovalRequest
}

// AttemptRecordParams describe an attempt denied before acceptance.
type AttemptRecordParams struct {
	RequestID   string
	Tenant      string
	OperationID string
	Fingerprint string
	Decision    Decision
	Reason      string
	Source      string
	// RunID, SessionID and TraceParent are recorded on the attempt, as
	// for AcceptParams.
	RunID       string
	SessionID   string
	TraceParent string
	Now         time.Time
}

// RefusedAttemptListParams select the denied attempts of one call that
// point at no operation: its tenant, operation ID and fingerprint, made
// between From and To (both included).
type RefusedAttemptListParams struct {
	Tenant      string
	OperationID string
	Fingerprint string
	From        time.Time
	To          time.Time
}

// OperationGetParams select one operation: by row ID, or by tenant and
// either task ID or operation ID. Tenant scoping is never optional for task
// and operation IDs: another tenant's task answers ErrNotFound.
type OperationGetParams struct {
	ID          int64
	Tenant      string
	TaskID      string
	OperationID string
}

// OperationListParams filter OperationList.
type OperationListParams struct {
	Tenant string // empty: every tenant
	// OperationID or TaskID select one operation ID or task ID across the
	// tenants the caller may see.
	OperationID string
	TaskID      string
	// OperationIDs select any of these operation IDs; empty selects by
	// none.
	OperationIDs []string
	// RunID selects the operations of one run: those with a created or
	// attached attempt that carried this run ID. SessionID does the same
	// for the MCP session the attempts came on. A conflicting or denied
	// attempt brings no operation into the run: the run caused none.
	RunID     string
	SessionID string
	// CreatedFrom and CreatedBefore bound when operations were accepted:
	// at or after CreatedFrom and before CreatedBefore; zero leaves that
	// side open.
	CreatedFrom   time.Time
	CreatedBefore time.Time
	States        []State
	Limit         int // zero: 100
	// BeforeID pages backwards: only operations with a smaller row ID.
	BeforeID int64
}

// ChainListParams select the chains ChainList reads.
type ChainListParams struct {
	Tenant string // empty: every tenant
	// OperationIDs, when set, select the operations that use these
	// operation IDs: every one, an ID used again after its retention too.
	OperationIDs []string
	// AfterRef pages forwards: only operations with a larger row ID.
	AfterRef int64
	Limit    int // zero: 100
}

// ApprovalListParams filter ApprovalList.
type ApprovalListParams struct {
	Tenant         string
	OperationID    string
	IncludeRevoked bool
}

// ApprovalRequestListParams filter ApprovalRequestList.
type ApprovalRequestListParams struct {
	Tenant string
	// Statuses selects requests in any of these statuses; empty selects
	// every status.
	Statuses []ApprovalRequestStatus
	// ExpiredBy, when set, selects only requests that expire at or before
	// it (for the expiry sweep). Tenant may then be empty: every tenant.
	ExpiredBy time.Time
	// ApprovalRef, when set, selects only the request that an approver
	// approved with this approval.
	ApprovalRef int64
	Limit       int // zero: 100
}

// ApprovalRequestDecision is one decision of an approval request.
type ApprovalRequestDecision struct {
	Tenant string
	ID     int64
	// Outcome is RequestApproved, RequestDeclined or RequestExpired.
	Outcome ApprovalRequestStatus
	// Approval holds the terms of an approve: MaxTotalCost, MaxRemoteJobs,
	// RetryPolicy and ExpiresAt; the tenant, operation ID and tool are the
	// request's, and CreatedBy is By.
	Approval *Approval
	// By is the approver's credential ID; empty for an expiry.
	By   string
	Note string
	// Enqueue and QueueLease are as for [AcceptParams]: the waiting
	// operation's dispatch, queued in the approving transaction.
	Enqueue    func(op *Operation) []river.InsertManyParams
	QueueLease time.Duration
	// Now is the decision time; zero means the store's clock.
	Now time.Time
}

// ApprovalRequestDecided is what a decision recorded: the request as it
// now stands, the approval an approve created, and the operation that
// waited (nil for a request without one).
type ApprovalRequestDecided struct {
	Request   *ApprovalRequest
	Approval  *Approval
	Operation *Operation
}

// ApprovalQuestionTakeParams name the question an answer claims to reply
// to, and what it must have been asked about.
type ApprovalQuestionTakeParams struct {
	Nonce       string
	Tenant      string
	OperationID string
	Tool        string
	Fingerprint string
	// Now decides expiry; zero means the store's clock.
	Now time.Time
}

// JobClient is the part of a River client that the worker package drives,
// free of the database's transaction type.
type JobClient interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
	StopAndCancel(ctx context.Context) error
	Insert(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
	JobList(ctx context.Context, params *river.JobListParams) (*river.JobListResult, error)
}
