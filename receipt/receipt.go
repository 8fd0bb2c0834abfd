// Package receipt holds the receipt model — the reconciled account of one
// operation — its review rules and next actions, and its three renderings
// (YAML, JSON, Markdown), with a JSON Schema for the JSON form ([Schema]).
// What the operation's jobs and charges add up to and whether its
// reconciliation is complete come from [reconcile.Assess], the assessment
// the worker records by, applied to what the ledger recorded.
//
// [Build] is a pure function of ledger data: the same [Input] always yields
// the same [Receipt]. [Load] only reads a [ledger.Store]. This package must
// never call a provider, never mutate the ledger and never read a clock
// inside Build; whatever a receipt says is derived from what the ledger
// recorded.
//
// # Money
//
// Receipts reckon in USD (the field names say so). Amounts are integer
// micro-units printed as decimals with at least two fractional digits: plain
// YAML numbers ("final_cost_usd: 17.84"), JSON strings ("17.84"), never
// floats. A charge in another currency is listed with its currency, left out
// of the USD totals, keeps reconciliation incomplete and gets a
// review_charge_currency next action.
//
// # What the receipt reads from events
//
// The reconciler records each pass as an event of kind
// [ledger.EventReconciled] whose data is
//
//	{"lookup": "answered" | "indeterminate", "detail": "…", "authoritative": true}
//
// The latest such event decides whether the provider could be asked: if its
// lookup is "indeterminate" (or its data cannot be read), reconciliation is
// indeterminate and the receipt asks to reconcile again. "authoritative"
// says that the provider's answer proves that a send without a known remote
// job started none; so do a failed event with {"nothing_started": true} and
// a lookup event with {"answer": "not_sent"} after the latest send_started
// ([reconcile.SendMayHaveStarted] reads them).
//
// Events about one remote job name it with "remote_job_id" (the provider's
// ID) in their data; cancellation_requested, effect_reversed and
// effect_not_reversed events without it apply to the whole operation. The
// ledger keeps no completion time on a remote job, so a job's completion is
// the first [ledger.EventRemoteJobObserved] event with data
// {"remote_job_id": "…", "status": "completed"}, or failing that the job's
// UpdatedAt.
//
// # Status rules
//
// reconciliation_status is the [reconcile.Status] of the ledger's jobs and
// charges, reckoned in USD: indeterminate when the last lookup was
// indeterminate, a remote job's status is unknown, or the operation was sent
// and no remote job is known while nothing shows that the send started none
// (the upstream refused it, it never left, or an authoritative lookup found
// nothing); complete only when the operation has ended, every remote job is
// terminal, every charge is final or refunded and in USD, and, for a priced
// tool, every completed job has a final or refunded charge; otherwise
// incomplete. The totals and unpriced_attempts come from the same
// assessment.
//
// review_status is blocked while a duplicate remote job is open (neither
// cancelled nor accepted); ready only when reconciliation is complete, no
// cost boundary breach is open and the operation is not waiting for review;
// otherwise needs_review.
package receipt

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/reconcile"
)

// Currency is the currency receipts reckon in.
const Currency = "USD"

// DefaultInvoiceGrace is how long after a priced remote job completes its
// invoice may take before the receipt sets a due time to chase it.
const DefaultInvoiceGrace = 24 * time.Hour

// Lookup outcomes the reconciler records in [ledger.EventReconciled] data.
const (
	LookupAnswered      = reconcile.LookupAnswered
	LookupIndeterminate = reconcile.LookupIndeterminate
)

// ReconciliationStatus says whether every remote job and charge of the
// operation is accounted for.
type ReconciliationStatus string

const (
	ReconciliationComplete      = ReconciliationStatus(reconcile.Complete)
	ReconciliationIncomplete    = ReconciliationStatus(reconcile.Incomplete)
	ReconciliationIndeterminate = ReconciliationStatus(reconcile.Indeterminate)
)

// ReviewStatus says whether the operation's outcome can be handed off.
type ReviewStatus string

const (
	ReviewReady       ReviewStatus = "ready"
	ReviewBlocked     ReviewStatus = "blocked"
	ReviewNeedsReview ReviewStatus = "needs_review"
)

// Next actions a receipt can name. Each targets one remote job, charge or
// operation.
const (
	ActionCancelDuplicate      = "cancel_duplicate"
	ActionRequestRefund        = "request_refund"
	ActionCheckLateInvoice     = "check_late_invoice"
	ActionReviewChargeCurrency = "review_charge_currency"
	ActionPreserveEvidence     = "preserve_evidence"
	ActionReconcileAgain       = "reconcile_again"
	ActionResolveReview        = "resolve_review"
)

// actionRank sorts next actions: what stops further spend comes first.
func actionRank(action string) int {
	return slices.Index([]string{
		ActionCancelDuplicate, ActionRequestRefund, ActionCheckLateInvoice, ActionReviewChargeCurrency,
		ActionPreserveEvidence, ActionReconcileAgain, ActionResolveReview,
	}, action)
}

// BreachCostBoundary is the kind of a breach of the approval's cost ceiling.
const BreachCostBoundary = ledger.EventCostBoundaryBreach

// Input is everything the receipt is computed from.
type Input struct {
	// Operation must not be nil.
	Operation *ledger.Operation
	// Attempts are the operation's attempts plus denied retries that point
	// at it (RelatedRef), as ledger.Store.AttemptList returns them.
	Attempts   []*ledger.Attempt
	RemoteJobs []*ledger.RemoteJob
	Charges    []*ledger.Charge
	// Approval is the approval the operation ran under; nil when none.
	Approval *ledger.Approval
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
// order of every rendering; the first twelve fields are the receipt's headline figures (README, "Receipts").
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

	Tenant          string `json:"tenant" yaml:"tenant"`
	TaskID          string `json:"task_id" yaml:"task_id"`
	Tool            string `json:"tool" yaml:"tool"` // "upstream.tool"
	State           string `json:"state" yaml:"state"`
	DeniedAttempts  int    `json:"denied_attempts" yaml:"denied_attempts"`
	PendingCostUSD  Money  `json:"pending_cost_usd" yaml:"pending_cost_usd"`
	RefundedCostUSD Money  `json:"refunded_cost_usd" yaml:"refunded_cost_usd"`
	// GeneratedAt is Input.Now.
	GeneratedAt time.Time `json:"generated_at,omitzero" yaml:"generated_at,omitempty"`
	// LastReconciliation is the latest reconciler pass; nil when none ran.
	LastReconciliation *Reconciliation `json:"last_reconciliation,omitempty" yaml:"last_reconciliation,omitempty"`
	// Approval is nil when the operation ran without one.
	Approval     *ApprovalTerms `json:"approval,omitempty" yaml:"approval,omitempty"`
	Breaches     []Breach       `json:"breaches" yaml:"breaches"`
	Lineage      []AttemptLine  `json:"lineage" yaml:"lineage"`
	RemoteJobs   []RemoteJob    `json:"remote_jobs" yaml:"remote_jobs"`
	Charges      []Charge       `json:"charges" yaml:"charges"`
	Cancellation *Cancellation  `json:"cancellation,omitempty" yaml:"cancellation,omitempty"`
	NextActions  []NextAction   `json:"next_actions" yaml:"next_actions"`
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
	ID              int64     `json:"id" yaml:"id"`
	MaxTotalCostUSD Money     `json:"max_total_cost_usd" yaml:"max_total_cost_usd"`
	MaxRemoteJobs   int       `json:"max_remote_jobs" yaml:"max_remote_jobs"`
	RetryPolicy     string    `json:"retry_policy" yaml:"retry_policy"`
	ExpiresAt       time.Time `json:"expires_at" yaml:"expires_at"`
	RevokedAt       time.Time `json:"revoked_at,omitzero" yaml:"revoked_at,omitempty"`
	// HeadroomUSD is the ceiling minus the larger of what reservations
	// commit and what final and pending charges add up to; negative once
	// the ceiling is breached.
	HeadroomUSD Money `json:"headroom_usd" yaml:"headroom_usd"`
	// RemoteJobsHeadroom is the job limit minus the larger of reserved and
	// observed remote jobs; negative when more jobs ran than approved.
	RemoteJobsHeadroom int `json:"remote_jobs_headroom" yaml:"remote_jobs_headroom"`
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
}

// RemoteJob is one provider-side job of the operation.
type RemoteJob struct {
	RemoteJobID string `json:"remote_job_id" yaml:"remote_job_id"`
	Upstream    string `json:"upstream" yaml:"upstream"`
	Endpoint    string `json:"endpoint" yaml:"endpoint"`
	Kind        string `json:"kind" yaml:"kind"`
	Status      string `json:"status" yaml:"status"`
	Intended    bool   `json:"intended" yaml:"intended"`
	Duplicate   bool   `json:"duplicate" yaml:"duplicate"`
	// DuplicateResolved is "open", "cancelled" or "accepted" for a
	// duplicate, empty otherwise.
	DuplicateResolved string    `json:"duplicate_resolved,omitempty" yaml:"duplicate_resolved,omitempty"`
	CompletedAt       time.Time `json:"completed_at,omitzero" yaml:"completed_at,omitempty"`
	CancelRequested   bool      `json:"cancel_requested" yaml:"cancel_requested"`
	CancelRequestedAt time.Time `json:"cancel_requested_at,omitzero" yaml:"cancel_requested_at,omitempty"`
	EffectReversed    string    `json:"effect_reversed" yaml:"effect_reversed"`
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

// eventData is the union of the event data fields the receipt reads.
type eventData struct {
	Lookup      string `json:"lookup"`
	Detail      string `json:"detail"`
	RemoteJobID string `json:"remote_job_id"`
	Status      string `json:"status"`
}

// readEvent parses an event's data; ok is false when it is not a JSON
// object the receipt can read.
func readEvent(e *ledger.Event) (d eventData, ok bool) {
	if len(e.Data) == 0 {
		return d, true
	}
	return d, json.Unmarshal(e.Data, &d) == nil
}

// facts are the ledger rows of one operation, sorted and indexed.
type facts struct {
	in          *Input
	op          *ledger.Operation
	attempts    []*ledger.Attempt
	jobs        []*ledger.RemoteJob
	charges     []*ledger.Charge
	events      []*ledger.Event
	jobByID     map[int64]*ledger.RemoteJob
	jobCharges  map[int64][]*ledger.Charge
	completedAt map[int64]time.Time
	// out is the assessment of jobs and charges; jobs[i] is out.Jobs[i].
	out reconcile.Outcome
}

func byTimeThenID[T any](at func(T) time.Time, id func(T) int64) func(a, b T) int {
	return func(a, b T) int {
		if c := at(a).Compare(at(b)); c != 0 {
			return c
		}
		return cmp.Compare(id(a), id(b))
	}
}

func newFacts(in *Input) *facts {
	f := &facts{
		in: in, op: in.Operation,
		jobByID:     map[int64]*ledger.RemoteJob{},
		jobCharges:  map[int64][]*ledger.Charge{},
		completedAt: map[int64]time.Time{},
	}
	// Sorting copies keeps Build from reordering the caller's slices.
	for _, a := range in.Attempts {
		if a != nil && belongs(a, f.op.ID) {
			f.attempts = append(f.attempts, a)
		}
	}
	slices.SortStableFunc(f.attempts, byTimeThenID(func(a *ledger.Attempt) time.Time { return a.CreatedAt }, func(a *ledger.Attempt) int64 { return a.ID }))
	for _, j := range in.RemoteJobs {
		if j != nil {
			f.jobs = append(f.jobs, j)
			f.jobByID[j.ID] = j
		}
	}
	slices.SortStableFunc(f.jobs, byTimeThenID(func(j *ledger.RemoteJob) time.Time { return j.CreatedAt }, func(j *ledger.RemoteJob) int64 { return j.ID }))
	for _, c := range in.Charges {
		if c != nil {
			f.charges = append(f.charges, c)
		}
	}
	slices.SortStableFunc(f.charges, byTimeThenID(func(c *ledger.Charge) time.Time { return c.CreatedAt }, func(c *ledger.Charge) int64 { return c.ID }))
	for _, c := range f.charges {
		f.jobCharges[c.RemoteJobRef] = append(f.jobCharges[c.RemoteJobRef], c)
	}
	for _, e := range in.Events {
		if e != nil {
			f.events = append(f.events, e)
		}
	}
	slices.SortStableFunc(f.events, byTimeThenID(func(e *ledger.Event) time.Time { return e.CreatedAt }, func(e *ledger.Event) int64 { return e.ID }))
	for _, j := range f.jobs {
		if jobStatus(j) == ledger.JobCompleted {
			f.completedAt[j.ID] = f.completion(j)
		}
	}
	return f
}

// belongs reports whether an attempt is part of operation opRef's lineage.
func belongs(a *ledger.Attempt, opRef int64) bool {
	return a.OperationRef == opRef || a.Decision == ledger.DecisionDenied && a.RelatedRef == opRef
}

// completion is when job j completed: the first observation that says so,
// else its last update.
func (f *facts) completion(j *ledger.RemoteJob) time.Time {
	for _, e := range f.events {
		if e.Kind != ledger.EventRemoteJobObserved {
			continue
		}
		if d, ok := readEvent(e); ok && d.RemoteJobID == j.RemoteID && d.Status == string(ledger.JobCompleted) {
			return e.CreatedAt
		}
	}
	return j.UpdatedAt
}

func jobStatus(j *ledger.RemoteJob) ledger.JobStatus {
	if j.Status == "" {
		return ledger.JobUnknown
	}
	return j.Status
}

func knowledge(k ledger.Knowledge) string {
	if k == "" {
		return string(ledger.Unknown)
	}
	return string(k)
}

func currencyOf(a money.Amount) string {
	if a.Currency == "" {
		return money.DefaultCurrency
	}
	return strings.ToUpper(a.Currency)
}

// chargeID names a charge by the provider's ID, or by its ledger row when
// the provider gave none.
func chargeID(c *ledger.Charge) string {
	if c.ProviderChargeID != "" {
		return c.ProviderChargeID
	}
	return fmt.Sprintf("ledger-charge-%d", c.ID)
}

// duplicateOpen reports whether a duplicate job still waits for someone to
// cancel or accept it.
func duplicateOpen(j *ledger.RemoteJob) bool {
	return j.Duplicate && j.DuplicateResolved != "cancelled" && j.DuplicateResolved != "accepted" && j.Status != ledger.JobCancelled
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

// Build computes the receipt of in.Operation from the ledger data in in. It
// is pure: it reads nothing but in and does not modify it.
func Build(in *Input) *Receipt {
	f := newFacts(in)
	op := f.op
	r := &Receipt{
		OperationID:        op.OperationID,
		IntendedRemoteJobs: op.IntendedRemoteJobs,
		ObservedRemoteJobs: len(f.jobs),
		EstimatedCostUSD:   Money{op.Estimate},
		Tenant:             op.Tenant,
		TaskID:             op.TaskID,
		Tool:               op.Upstream + "." + op.Tool,
		State:              string(op.State),
		GeneratedAt:        utc(in.Now),
		Breaches:           []Breach{},
		Lineage:            []AttemptLine{},
		RemoteJobs:         []RemoteJob{},
		Charges:            []Charge{},
		NextActions:        []NextAction{},
	}
	if r.EstimatedCostUSD.Currency == "" {
		r.EstimatedCostUSD.Currency = Currency
	}

	f.countAttempts(r)
	for _, j := range f.jobs {
		if j.Duplicate {
			r.DuplicateJobs++
		}
		r.RemoteJobs = append(r.RemoteJobs, f.remoteJob(j))
	}
	r.LastReconciliation = f.lastReconciliation()
	f.out = reconcile.Assess(f.reconcileFacts(r.LastReconciliation))
	f.listCharges(r)
	r.UnpricedAttempts = f.out.UnpricedAttempts
	r.ResultUsed = f.resultUsed()
	r.ReconciliationStatus = ReconciliationStatus(f.out.Status)
	r.Approval = f.approvalTerms(r)
	r.Breaches = f.breaches(r)
	r.ReviewStatus = f.reviewStatus(r)
	r.Cancellation = f.cancellation()
	r.NextActions = f.nextActions(r)
	return r
}

func (f *facts) countAttempts(r *Receipt) {
	for _, a := range f.attempts {
		switch {
		case a.Decision == ledger.DecisionDenied:
			r.DeniedAttempts++
		default:
			r.Attempts++
			if a.Decision == ledger.DecisionAttached {
				r.AttachedAttempts++
			}
		}
		client := string(a.ClientResult)
		if client == "" {
			client = string(ledger.ClientUnknown)
		}
		r.Lineage = append(r.Lineage, AttemptLine{
			RequestID:      a.RequestID,
			OperationID:    a.OperationID,
			Decision:       string(a.Decision),
			Reason:         a.Reason,
			ClientResult:   client,
			RemoteAccepted: knowledge(a.RemoteAccepted),
			RemoteEffect:   knowledge(a.RemoteEffect),
			ChargeStatus:   knowledge(a.ChargeStatus),
			At:             utc(a.CreatedAt),
		})
	}
}

func (f *facts) remoteJob(j *ledger.RemoteJob) RemoteJob {
	out := RemoteJob{
		RemoteJobID:       j.RemoteID,
		Upstream:          j.Upstream,
		Endpoint:          j.Endpoint,
		Kind:              j.Kind,
		Status:            string(jobStatus(j)),
		Intended:          j.Intended,
		Duplicate:         j.Duplicate,
		CompletedAt:       utc(f.completedAt[j.ID]),
		CancelRequested:   !j.CancelRequestedAt.IsZero(),
		CancelRequestedAt: utc(j.CancelRequestedAt),
		EffectReversed:    knowledge(j.EffectReversed),
	}
	switch {
	case !j.Duplicate:
	case j.DuplicateResolved != "":
		out.DuplicateResolved = j.DuplicateResolved
	case j.Status == ledger.JobCancelled:
		out.DuplicateResolved = "cancelled"
	default:
		out.DuplicateResolved = "open"
	}
	return out
}

func (f *facts) jobRemoteID(ref int64) string {
	if j := f.jobByID[ref]; j != nil {
		return j.RemoteID
	}
	return ""
}

// listCharges lists the charges and their USD totals.
func (f *facts) listCharges(r *Receipt) {
	for _, c := range f.charges {
		r.Charges = append(r.Charges, Charge{
			ChargeID:    chargeID(c),
			RemoteJobID: f.jobRemoteID(c.RemoteJobRef),
			Amount:      Money{c.Amount},
			Currency:    currencyOf(c.Amount),
			Status:      string(c.Status),
		})
	}
	t := f.out.Totals
	r.FinalCostUSD, r.PendingCostUSD, r.RefundedCostUSD = Money{t.Final}, Money{t.Pending}, Money{t.Refunded}
}

// reconcileFacts are the facts of the operation as the ledger recorded
// them, for [reconcile.Assess]; last is the latest reconciler pass.
func (f *facts) reconcileFacts(last *Reconciliation) *reconcile.Facts {
	rf := &reconcile.Facts{
		Operation: f.op, Currency: Currency, Priced: f.in.Priced,
		Indeterminate: last != nil && last.Lookup == LookupIndeterminate,
		Attempts:      f.attempts, Events: f.events,
	}
	for _, j := range f.jobs {
		rf.Jobs = append(rf.Jobs, reconcile.Job{ID: j.RemoteID, Attempt: j.AttemptRef, Status: j.Status, Intended: j.Intended, Duplicate: j.Duplicate})
	}
	for _, c := range f.charges {
		rf.Charges = append(rf.Charges, reconcile.Charge{ID: chargeID(c), JobID: f.jobRemoteID(c.RemoteJobRef), Amount: c.Amount, Status: c.Status})
	}
	return rf
}

// resultUsed is the intended job's ID, else the only completed job's.
func (f *facts) resultUsed() string {
	var completed []*ledger.RemoteJob
	for _, j := range f.jobs {
		if j.Intended {
			return j.RemoteID
		}
		if j.Status == ledger.JobCompleted {
			completed = append(completed, j)
		}
	}
	if len(completed) == 1 {
		return completed[0].RemoteID
	}
	return ""
}

func (f *facts) lastReconciliation() *Reconciliation {
	for _, e := range slices.Backward(f.events) {
		if e.Kind != ledger.EventReconciled {
			continue
		}
		d, ok := readEvent(e)
		rec := &Reconciliation{Lookup: d.Lookup, Detail: d.Detail, At: utc(e.CreatedAt)}
		if !ok || (d.Lookup != LookupAnswered && d.Lookup != LookupIndeterminate) {
			// A pass the receipt cannot read proves nothing about the provider.
			rec.Lookup = LookupIndeterminate
			rec.Detail = fmt.Sprintf("unreadable reconciliation record: %s", e.Data)
		}
		return rec
	}
	return nil
}

func (f *facts) approvalTerms(r *Receipt) *ApprovalTerms {
	a := f.in.Approval
	if a == nil {
		return nil
	}
	used := policy.Committed(f.in.Reservations, Currency)
	spent := max(used.Spend.Micros, r.FinalCostUSD.Micros+r.PendingCostUSD.Micros)
	jobs := max(used.RemoteJobs, len(f.jobs))
	return &ApprovalTerms{
		ID:                 a.ID,
		MaxTotalCostUSD:    Money{a.MaxTotalCost},
		MaxRemoteJobs:      a.MaxRemoteJobs,
		RetryPolicy:        a.RetryPolicy,
		ExpiresAt:          utc(a.ExpiresAt),
		RevokedAt:          utc(a.RevokedAt),
		HeadroomUSD:        usd(a.MaxTotalCost.Micros - spent),
		RemoteJobsHeadroom: a.MaxRemoteJobs - jobs,
	}
}

// breaches lists a cost boundary breach when the operation was flagged or
// its final cost exceeds the approval's ceiling.
func (f *facts) breaches(r *Receipt) []Breach {
	a := f.in.Approval
	over := a != nil && r.FinalCostUSD.Micros > a.MaxTotalCost.Micros
	if !f.op.CostBreach && !over {
		return []Breach{}
	}
	b := Breach{Kind: BreachCostBoundary, FinalCostUSD: r.FinalCostUSD, Open: over || a == nil}
	if a != nil {
		ceiling, by := usd(a.MaxTotalCost.Micros), usd(max(0, r.FinalCostUSD.Micros-a.MaxTotalCost.Micros))
		b.CeilingUSD, b.OverByUSD = &ceiling, &by
	}
	if c := f.overCeilingCharge(); c != nil {
		b.ChargeID = chargeID(c)
	}
	return []Breach{b}
}

// overCeilingCharge is the final charge whose arrival took the running
// total above the ceiling, or the last final charge when the ceiling is
// unknown.
func (f *facts) overCeilingCharge() *ledger.Charge {
	var total int64
	var last *ledger.Charge
	for _, c := range f.charges {
		if c.Status != ledger.ChargeFinal || currencyOf(c.Amount) != Currency {
			continue
		}
		total += c.Amount.Micros
		last = c
		if a := f.in.Approval; a != nil && total > a.MaxTotalCost.Micros {
			return c
		}
	}
	if f.in.Approval == nil {
		return last
	}
	return nil
}

func (f *facts) reviewStatus(r *Receipt) ReviewStatus {
	if slices.ContainsFunc(f.jobs, duplicateOpen) {
		return ReviewBlocked
	}
	openBreach := slices.ContainsFunc(r.Breaches, func(b Breach) bool { return b.Open })
	if r.ReconciliationStatus == ReconciliationComplete && !openBreach && f.op.State != ledger.StateReview {
		return ReviewReady
	}
	return ReviewNeedsReview
}

// cancelRequest is one recorded request to cancel; job is empty when it
// covers the whole operation.
type cancelRequest struct {
	at  time.Time
	job string
}

func (f *facts) cancellation() *Cancellation {
	c := &Cancellation{}
	stopped := func(at time.Time) {
		if !c.ClientStoppedWatching || at.Before(c.ClientStoppedWatchingAt) {
			c.ClientStoppedWatchingAt = at
		}
		c.ClientStoppedWatching = true
	}
	for _, a := range f.attempts {
		if a.ClientResult == ledger.ClientDisconnected || a.ClientResult == ledger.ClientTimedOut {
			stopped(cmp.Or(a.UpdatedAt, a.CreatedAt))
		}
	}

	var requests []cancelRequest
	if !f.op.CancelRequestedAt.IsZero() {
		requests = append(requests, cancelRequest{at: f.op.CancelRequestedAt})
	}
	for _, j := range f.jobs {
		if !j.CancelRequestedAt.IsZero() {
			requests = append(requests, cancelRequest{at: j.CancelRequestedAt, job: j.RemoteID})
		}
	}
	// reversal is the latest recorded reversal fact per job ("" for the
	// whole operation).
	reversal := map[string]string{}
	for _, e := range f.events {
		d, _ := readEvent(e)
		switch e.Kind {
		case ledger.EventClientStoppedWatching:
			stopped(e.CreatedAt)
		case ledger.EventCancellationRequested:
			requests = append(requests, cancelRequest{at: e.CreatedAt, job: d.RemoteJobID})
		case ledger.EventEffectReversed:
			reversal[d.RemoteJobID] = string(ledger.Yes)
		case ledger.EventEffectNotReversed:
			reversal[d.RemoteJobID] = string(ledger.No)
			c.RequestedAfterEffect = true
		}
	}
	for _, rq := range requests {
		if !c.CancellationRequested || rq.at.Before(c.CancellationRequestedAt) {
			c.CancellationRequestedAt = rq.at
		}
		c.CancellationRequested = true
		for _, j := range f.jobs {
			done, ok := f.completedAt[j.ID]
			if ok && (rq.job == "" || rq.job == j.RemoteID) && !rq.at.Before(done) {
				c.RequestedAfterEffect = true
			}
		}
	}

	jobFacts := slices.ContainsFunc(f.jobs, func(j *ledger.RemoteJob) bool {
		return j.EffectReversed == ledger.Yes || j.EffectReversed == ledger.No
	})
	if c.CancellationRequested || len(reversal) > 0 || jobFacts {
		c.EffectReversed = f.effectReversed(requests, reversal)
	}
	if !c.ClientStoppedWatching && !c.CancellationRequested && c.EffectReversed == "" {
		return nil
	}
	c.ClientStoppedWatchingAt = utc(c.ClientStoppedWatchingAt)
	c.CancellationRequestedAt = utc(c.CancellationRequestedAt)
	return c
}

// effectReversed aggregates over the jobs a cancellation or reversal fact
// concerns: "no" if any effect stands, "yes" if every one was reversed,
// otherwise "unknown".
func (f *facts) effectReversed(requests []cancelRequest, reversal map[string]string) string {
	var values []string
	for _, j := range f.jobs {
		concerned := j.EffectReversed == ledger.Yes || j.EffectReversed == ledger.No
		_, recorded := reversal[j.RemoteID]
		concerned = concerned || recorded || slices.ContainsFunc(requests, func(rq cancelRequest) bool {
			return rq.job == "" || rq.job == j.RemoteID
		})
		if !concerned {
			continue
		}
		v := string(j.EffectReversed)
		if v != string(ledger.Yes) && v != string(ledger.No) {
			v = cmp.Or(reversal[j.RemoteID], reversal[""], string(ledger.Unknown))
		}
		values = append(values, v)
	}
	if len(values) == 0 {
		return cmp.Or(reversal[""], string(ledger.Unknown))
	}
	switch {
	case slices.Contains(values, string(ledger.No)):
		return string(ledger.No)
	case !slices.ContainsFunc(values, func(v string) bool { return v != string(ledger.Yes) }):
		return string(ledger.Yes)
	default:
		return string(ledger.Unknown)
	}
}

func (f *facts) nextActions(r *Receipt) []NextAction {
	owner := cmp.Or(f.in.Owner, f.op.Tenant)
	grace := f.in.InvoiceGrace
	if grace <= 0 {
		grace = DefaultInvoiceGrace
	}
	var out []NextAction
	seen := map[[2]string]bool{}
	add := func(a NextAction) {
		k := [2]string{a.Action, a.Target}
		if seen[k] {
			return
		}
		seen[k] = true
		a.Owner = owner
		out = append(out, a)
	}
	var evidence []string

	for i, j := range f.jobs {
		if j.Duplicate {
			evidence = append(evidence, "duplicate remote job "+j.RemoteID)
		}
		if duplicateOpen(j) {
			add(NextAction{Action: ActionCancelDuplicate, Target: j.RemoteID,
				Reason: fmt.Sprintf("duplicate remote job (status %s) beyond the %d intended; cancel it, or accept it deliberately", jobStatus(j), f.op.IntendedRemoteJobs)})
		}
		if j.Duplicate && j.DuplicateResolved != "accepted" {
			for _, c := range f.jobCharges[j.ID] {
				if c.Status == ledger.ChargeFinal || c.Status == ledger.ChargePending {
					add(NextAction{Action: ActionRequestRefund, Target: chargeID(c),
						Reason: fmt.Sprintf("%s charge of %s on duplicate remote job %s", c.Status, c.Amount.Display(), j.RemoteID)})
				}
			}
		}
		if f.out.Jobs[i].Uninvoiced {
			reason := "remote job completed with no charge recorded; the provider contract prices this tool"
			if n := len(f.jobCharges[j.ID]); n > 0 {
				reason = fmt.Sprintf("remote job completed and its %d charge(s) are not final yet", n)
			}
			var due time.Time
			if done := f.completedAt[j.ID]; !done.IsZero() {
				due = utc(done.Add(grace))
			}
			add(NextAction{Action: ActionCheckLateInvoice, Target: j.RemoteID, Reason: reason, Due: due})
		}
	}
	for _, b := range r.Breaches {
		evidence = append(evidence, "cost boundary breach")
		if b.Open && b.ChargeID != "" {
			reason := fmt.Sprintf("final cost %s is above the approved ceiling", b.FinalCostUSD.Display())
			if b.CeilingUSD != nil {
				reason = fmt.Sprintf("final cost %s exceeds the approved ceiling of %s by %s", b.FinalCostUSD.Display(), b.CeilingUSD.Display(), b.OverByUSD.Display())
			}
			add(NextAction{Action: ActionRequestRefund, Target: b.ChargeID, Reason: reason})
		}
	}
	for _, c := range f.charges {
		if cur := currencyOf(c.Amount); cur != Currency {
			add(NextAction{Action: ActionReviewChargeCurrency, Target: chargeID(c),
				Reason: fmt.Sprintf("charged %s; the receipt reckons in %s, so this charge is not in its totals", c.Amount.Display(), Currency)})
		}
	}
	if r.ReconciliationStatus == ReconciliationIndeterminate {
		reason := f.indeterminateReason(r.LastReconciliation)
		evidence = append(evidence, "indeterminate provider lookup")
		add(NextAction{Action: ActionReconcileAgain, Target: f.op.OperationID, Reason: reason})
	}
	if len(evidence) > 0 {
		add(NextAction{Action: ActionPreserveEvidence, Target: f.op.OperationID,
			Reason: "keep the ledger, attempts and provider records: " + strings.Join(evidence, "; ")})
	}
	if f.op.State == ledger.StateReview {
		reason := cmp.Or(f.op.ReviewReason, f.op.StatusMessage, "the operation waits for a human decision")
		add(NextAction{Action: ActionResolveReview, Target: f.op.OperationID, Reason: reason})
	}

	slices.SortStableFunc(out, func(a, b NextAction) int {
		if c := cmp.Compare(actionRank(a.Action), actionRank(b.Action)); c != 0 {
			return c
		}
		return cmp.Compare(a.Target, b.Target)
	})
	if out == nil {
		out = []NextAction{}
	}
	return out
}

func (f *facts) indeterminateReason(last *Reconciliation) string {
	if last != nil && last.Lookup == LookupIndeterminate {
		if last.Detail != "" {
			return "the last provider lookup was indeterminate: " + last.Detail
		}
		return "the last provider lookup was indeterminate"
	}
	var unknown []string
	for i, j := range f.jobs {
		if f.out.Jobs[i].Unknown {
			unknown = append(unknown, j.RemoteID)
		}
	}
	if len(unknown) == 0 {
		return fmt.Sprintf("the operation was sent %d time(s) and no remote job is known, but nothing shows that none started; look the operation up at the provider", f.op.SendCount)
	}
	return "the status of remote job(s) " + strings.Join(unknown, ", ") + " is unknown"
}
