// Package reconcile holds the one assessment of an operation's remote jobs
// and charges: whether its reconciliation is complete, incomplete or
// indeterminate, which jobs are duplicates, what its charges add up to,
// whether a send may have started work nobody knows of, how its spend
// reservation settles, and which newly seen jobs must be asked to stop.
//
// [Assess] is a pure function of its [Facts]: the worker gathers the facts
// from the ledger and the provider, assesses them and records the
// [Outcome]; package receipt assesses the facts the ledger recorded and
// prints the outcome. Both therefore apply the same rules. This package
// must never read a clock, a database or the network, and never import the
// worker or the receipt.
//
// # Rules
//
// Charges are added up in the operation's currency only ([Sum]): a charge
// in another currency, or one that would take a total out of range, is left
// out of its total and listed as uncounted.
//
// The status is indeterminate when the provider could not be asked about
// everything, a remote job's status is unknown, or the operation was sent
// and no remote job is known while nothing shows that the send started none
// ([SendMayHaveStarted]); complete only when the operation has ended, every
// remote job is terminal, every charge is final or refunded and counted,
// and, for a priced tool, every completed job has a final or refunded
// charge; otherwise incomplete.
//
// A call intends as many remote jobs as its route (one, or more for a call
// that fans out). The jobs the ledger binds as intended stay intended; while
// fewer are, the earliest other jobs become intended; once the intended
// number is reached, every other job is a duplicate ([MatchRoute]). An
// operation that completed with fewer jobs than intended is missing the
// rest.
//
// A reservation is released when the operation has ended with no remote job
// and the provider answered; it settles at the final cost once that cost is
// known: the provider answered, every job is terminal, no charge is
// pending, every completed job of a priced tool is invoiced and every final
// charge is counted. Otherwise it stays held.
package reconcile

import (
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
)

// Lookup outcomes the worker records in [ledger.EventReconciled] data.
const (
	LookupAnswered      = "answered"
	LookupIndeterminate = "indeterminate"
)

// Status says whether every remote job and charge of an operation is
// accounted for.
type Status string

const (
	Complete      Status = "complete"
	Incomplete    Status = "incomplete"
	Indeterminate Status = "indeterminate"
)

// Facts are what is known of one operation.
type Facts struct {
	// Operation must not be nil.
	Operation *ledger.Operation
	// Currency is what charges are added up in.
	Currency string
	// Priced says the tool's provider contract prices it: a completed job
	// without a final or refunded charge is then missing an invoice.
	Priced bool
	// Indeterminate says the provider could not be asked about everything:
	// a lookup, a job status or a charge query failed.
	Indeterminate bool
	// NotFoundProven says that an authoritative lookup (not_found after the
	// contract's safe delay) shows that no job exists.
	NotFoundProven bool
	// Jobs are the operation's remote jobs, in order.
	Jobs []Job
	// Charges are the charges of Jobs, in order.
	Charges []Charge
	// Attempts and Events are the operation's ledger records, in order.
	// They are read only when the operation was sent and no job is known;
	// a caller that knows a job may leave them nil.
	Attempts []*ledger.Attempt
	Events   []*ledger.Event
}

// Job is one remote job of the operation.
type Job struct {
	// ID names the job; a [Charge]'s RemoteJobID refers to it.
	ID string
	// Attempt is the ledger ID of the attempt that caused the job; zero
	// when none is known.
	Attempt   int64
	Status    ledger.JobStatus
	Intended  bool
	Duplicate bool
	// New says the job was found now and is not yet in the ledger.
	New bool
}

// Charge is one priced effect of a remote job.
type Charge struct {
	ID          string
	RemoteJobID string
	Amount      money.Amount
	Status      ledger.ChargeStatus
}

// Reservation is what happens to the operation's spend reservation.
type Reservation int

const (
	// Hold leaves the reservation as it is.
	Hold Reservation = iota
	// Settle settles it at Outcome.Totals.Final.
	Settle
	// Release releases it: nothing was spent.
	Release
)

// Outcome is the assessment of one operation's [Facts].
type Outcome struct {
	Status Status
	Totals Totals
	// Jobs is parallel to Facts.Jobs.
	Jobs []JobOutcome
	// SentWithoutKnownJob says the operation was sent, no job is known and
	// nothing shows that the send started none: zero jobs mean "none
	// known", not "none".
	SentWithoutKnownJob bool
	// Authoritative says the operation was sent, no job is known, and that
	// is proven to mean that none started.
	Authoritative bool
	// Reservation is Hold when the operation has no approval.
	Reservation Reservation
	// Accepted, Effect and Charged are what is now known of the creating
	// attempt; empty means nothing new.
	Accepted, Effect, Charged ledger.Knowledge
	// UnpricedAttempts counts, for a priced tool, the attempts whose jobs
	// have no charge at all; a job bound to no attempt counts alone.
	UnpricedAttempts int
	// MissingJobs counts the intended remote jobs that an operation which
	// completed, as far as the provider answered, never showed.
	MissingJobs int
}

// JobOutcome is the assessment of one job.
type JobOutcome struct {
	Intended  bool
	Duplicate bool
	// NewDuplicate says this assessment made the job a duplicate.
	NewDuplicate bool
	// Unknown says the job's status is unknown.
	Unknown bool
	// Uninvoiced says the job of a priced tool completed without a final
	// or refunded charge.
	Uninvoiced bool
	// Cancel says the job is new while the operation's cancellation was
	// requested: it must be asked to stop.
	Cancel bool
}

// Cancels counts the jobs to ask to stop.
func (o Outcome) Cancels() int {
	n := 0
	for _, j := range o.Jobs {
		if j.Cancel {
			n++
		}
	}
	return n
}

// Assess applies the package's rules to f.
func Assess(f *Facts) Outcome {
	op := f.Operation
	out := Outcome{Totals: Sum(f.Charges, f.Currency), Jobs: make([]JobOutcome, len(f.Jobs))}
	invoiced := map[string]bool{}
	for _, c := range f.Charges {
		if settled(c.Status) {
			invoiced[c.RemoteJobID] = true
		}
	}

	allTerminal, unknown, uninvoiced, intendedDone := true, false, false, false
	for i, j := range f.Jobs {
		o := &out.Jobs[i]
		o.Intended, o.Duplicate = j.Intended, j.Duplicate
		o.Unknown = j.Status == "" || j.Status == ledger.JobUnknown
		o.Uninvoiced = f.Priced && j.Status == ledger.JobCompleted && !invoiced[j.ID]
		o.Cancel = !op.CancelRequestedAt.IsZero() && j.New && j.Status != ledger.JobCancelled
		allTerminal = allTerminal && j.Status.Terminal()
		unknown = unknown || o.Unknown
		uninvoiced = uninvoiced || o.Uninvoiced
	}
	missing := MatchRoute(out.Jobs, op.IntendedRemoteJobs)
	for i, j := range f.Jobs {
		intendedDone = intendedDone || out.Jobs[i].Intended && j.Status == ledger.JobCompleted
	}

	if op.SendCount > 0 && len(f.Jobs) == 0 {
		out.SentWithoutKnownJob = !f.NotFoundProven && SendMayHaveStarted(op, f.Attempts, f.Events)
		out.Authoritative = !out.SentWithoutKnownJob
	}
	answered := !f.Indeterminate && !out.SentWithoutKnownJob
	outstanding := false
	for _, c := range f.Charges {
		outstanding = outstanding || !settled(c.Status)
	}
	// known: the final cost is known, whatever the operation does next.
	known := answered && allTerminal && !outstanding && !uninvoiced

	switch {
	case !answered || unknown:
		out.Status = Indeterminate
	case !op.State.Terminal() || !known || len(out.Totals.Uncounted) > 0:
		out.Status = Incomplete
	default:
		out.Status = Complete
	}

	if op.ApprovalID != 0 {
		switch {
		case len(f.Jobs) == 0 && op.State.Terminal() && answered:
			out.Reservation = Release
		case known && len(out.Totals.UncountedFinal()) == 0:
			out.Reservation = Settle
		}
	}

	if len(f.Jobs) > 0 {
		out.Accepted = ledger.Yes
	}
	if intendedDone {
		out.Effect = ledger.Yes
	}
	if out.Totals.Final.Micros > 0 {
		out.Charged = ledger.Yes
	} else if known && f.Priced {
		out.Charged = ledger.No
	}
	out.UnpricedAttempts = unpricedAttempts(f)
	if op.State == ledger.StateCompleted && len(f.Jobs) > 0 && answered {
		out.MissingJobs = missing
	}
	return out
}

// MatchRoute matches an operation's remote jobs, in order, to the
// intended number of its route: the earliest jobs already intended stay
// intended, up to that number; the earliest others that are not duplicates
// become intended while fewer are; and once the intended number is reached
// every other job becomes a duplicate (NewDuplicate), an intended one
// beyond the number too. It returns how many intended jobs are missing. An
// intended number below one counts as one.
func MatchRoute(jobs []JobOutcome, intendedJobs int) (missing int) {
	intendedJobs = max(intendedJobs, 1)
	n := 0
	for i := range jobs {
		if jobs[i].Intended {
			if n < intendedJobs {
				n++
			} else {
				jobs[i].Intended = false
			}
		}
	}
	for i := range jobs {
		if n < intendedJobs && !jobs[i].Intended && !jobs[i].Duplicate {
			jobs[i].Intended = true
			n++
		}
	}
	for i := range jobs {
		if !jobs[i].Intended && !jobs[i].Duplicate {
			jobs[i].Duplicate, jobs[i].NewDuplicate = true, true
		}
	}
	return max(intendedJobs-n, 0)
}

func unpricedAttempts(f *Facts) int {
	if !f.Priced {
		return 0
	}
	charged := map[string]bool{}
	for _, c := range f.Charges {
		charged[c.RemoteJobID] = true
	}
	// Jobs are grouped by attempt; a job bound to no attempt is its own
	// group.
	type key struct {
		attempt int64
		job     int
	}
	priced := map[key]bool{}
	var order []key
	for i, j := range f.Jobs {
		k := key{attempt: j.Attempt}
		if j.Attempt == 0 {
			k = key{job: i + 1}
		}
		if _, seen := priced[k]; !seen {
			order = append(order, k)
		}
		priced[k] = priced[k] || charged[j.ID]
	}
	n := 0
	for _, k := range order {
		if !priced[k] {
			n++
		}
	}
	return n
}

// SendMayHaveStarted reports whether the operation's latest send may have
// started work: false only when the ledger shows that the upstream refused
// it before any work began (or, after a single send, that the creating
// attempt started nothing), that it answered with a question (the call
// runs only when a later send brings the answer), that it never left the
// gateway, or that a reconciliation since proved with an authoritative
// lookup that no job exists.
func SendMayHaveStarted(op *ledger.Operation, attempts []*ledger.Attempt, events []*ledger.Event) bool {
	if op.SendCount == 1 {
		// With one send only, what is known of the creating attempt is
		// known of that send (ledgers from before the events said so).
		for _, a := range attempts {
			if a.OperationRef == op.ID && a.Decision == ledger.DecisionCreated && a.RemoteAccepted == ledger.No {
				return false
			}
		}
	}
	for i := len(events) - 1; i >= 0; i-- {
		e := events[i]
		if e.Kind == ledger.EventSendStarted {
			return true
		}
		if provesNothingStarted(e) {
			return false
		}
	}
	return true
}

// provesNothingStarted reports whether e proves that the send before it
// started no work. A record that cannot be read proves nothing, as in the
// receipt.
func provesNothingStarted(e *ledger.Event) bool {
	switch e.Kind {
	case ledger.EventFailed:
		d, err := ledger.DecodeEventData[ledger.FailedData](e)
		return err == nil && d.NothingStarted
	case ledger.EventLookup:
		d, err := ledger.DecodeEventData[ledger.LookupData](e)
		return err == nil && d.Answer == ledger.LookupNotSent
	case ledger.EventReconciled:
		d, err := ledger.DecodeEventData[ledger.ReconciledData](e)
		return err == nil && d.Authoritative
	case ledger.EventInputRequested:
		// The upstream answered the send with a question instead of a
		// result: the call has not run yet, it waits for the answer,
		// which only a later send carries. A question asked within the
		// call (a 2025-11-25 elicitation) proves nothing: the call was
		// already running, and its answer goes back to the same send.
		d, err := ledger.DecodeEventData[ledger.InputRequestedData](e)
		return err == nil && !d.InFlight
	}
	return false
}

func settled(s ledger.ChargeStatus) bool {
	return s == ledger.ChargeFinal || s == ledger.ChargeRefunded
}
