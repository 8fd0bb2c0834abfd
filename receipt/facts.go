package receipt

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/reconcile"
)

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
	// evidence is each remote job's latest provider records, by job ID.
	evidence map[string][]Evidence
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
		if a != nil && belongs(a, f.op) {
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
	f.evidence = latestEvidence(f.events)
	return f
}

// latestEvidence is, for each remote job, the latest provider record of
// each kind that a reconciliation recorded, status before charges. A
// record the receipt cannot read is left out: it proves nothing.
func latestEvidence(events []*ledger.Event) map[string][]Evidence {
	type key struct{ job, kind string }
	latest := map[key]Evidence{}
	for _, e := range events {
		if e.Kind != ledger.EventReconciled {
			continue
		}
		d, err := ledger.DecodeEventData[ledger.ReconciledData](e)
		if err != nil {
			continue
		}
		for _, rec := range d.Evidence {
			latest[key{rec.RemoteJobID, string(rec.Kind)}] = Evidence{Record: string(rec.Kind), Tool: rec.Tool, Answer: rec.Answer, SeenAt: utc(e.CreatedAt)}
		}
	}
	out := map[string][]Evidence{}
	for _, kind := range []ledger.ProviderRecordKind{ledger.RecordStatus, ledger.RecordCharges} {
		for k, ev := range latest {
			if k.kind == string(kind) {
				out[k.job] = append(out[k.job], ev)
			}
		}
	}
	return out
}

// belongs reports whether an attempt is part of op's lineage: it resolved
// to op, or was denied pointing at it, or was denied under op's operation
// ID before op existed, pointing at no operation.
func belongs(a *ledger.Attempt, op *ledger.Operation) bool {
	if a.OperationRef == op.ID {
		return true
	}
	if a.Decision != ledger.DecisionDenied {
		return false
	}
	return a.RelatedRef == op.ID || a.OperationRef == 0 && a.RelatedRef == 0 && a.Tenant == op.Tenant && a.OperationID == op.OperationID
}

// completion is when job j completed: the first observation that says so,
// else its last update.
func (f *facts) completion(j *ledger.RemoteJob) time.Time {
	for _, e := range f.events {
		if e.Kind != ledger.EventRemoteJobObserved {
			continue
		}
		// An observation the receipt cannot read proves nothing.
		if d, err := ledger.DecodeEventData[ledger.RemoteJobData](e); err == nil && d.RemoteJobID == j.RemoteJobID && d.Status == ledger.JobCompleted {
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

func (f *facts) remoteJobID(ref int64) string {
	if j := f.jobByID[ref]; j != nil {
		return j.RemoteJobID
	}
	return ""
}
