package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/provider"
	"github.com/taskgate/taskgate/taskwire"
)

// Reconcile queries the provider about every job the operation's ID and
// known job IDs lead to, records every job, status and charge it finds,
// marks jobs beyond the intended number as duplicates, settles the spend
// reservation and flags a cost boundary breach. It reports whether anything
// is still open (so that it should run again later). The outcome of the
// provider lookup is recorded as a reconciled event with data
// {"lookup": "answered"|"indeterminate", "detail": …}, which receipts read.
func (w *Worker) Reconcile(ctx context.Context, opRef int64) (open bool, err error) {
	op, err := w.store.OperationGet(ctx, &ledger.OperationGetParams{ID: opRef})
	if err != nil {
		return false, err
	}
	c := w.catalog.Contract(op.Upstream, op.Tool)
	up, ok := w.upstreams.Upstream(op.Upstream)
	if c == nil || !ok {
		_, err := w.store.Transition(ctx, &ledger.TransitionParams{OperationRef: op.ID, Events: []ledger.EventParams{{
			Kind: ledger.EventReconciled, Data: map[string]any{"lookup": "indeterminate", "detail": "the configuration no longer has this tool", "complete": false},
		}}})
		return false, err
	}
	known, err := w.store.RemoteJobList(ctx, op.ID)
	if err != nil {
		return false, err
	}

	r := &reconciliation{op: op, lookup: "answered"}
	byID := map[string]*ledger.RemoteJob{}
	for _, j := range known {
		byID[j.RemoteID] = j
		r.jobs = append(r.jobs, jobView{id: j.RemoteID, taskID: j.UpstreamTaskID, status: j.Status, intended: j.Intended, duplicate: j.Duplicate, known: true})
	}

	// Every job the provider holds for this operation ID.
	notFoundSafe := false
	if c.CanLookup() && op.SendCount > 0 {
		lr := c.Lookup(ctx, up, op.ProviderKey(), op.Arguments)
		switch lr.Answer {
		case provider.Indeterminate:
			r.indeterminate(lr.Detail)
		case provider.NotFound:
			// not_found proves that no job exists only once the contract's
			// safe delay has passed since the latest send.
			if safe := c.Policy.Contract.Lookup.NotFoundSafeAfter; safe != nil {
				since, err := w.sinceSend(ctx, op)
				if err != nil {
					return false, err
				}
				notFoundSafe = since >= *safe
			}
		default:
			refs := lr.Jobs
			if len(refs) == 0 && lr.JobID != "" {
				refs = []provider.JobRef{{ID: lr.JobID, Answer: lr.Answer}}
			}
			if len(refs) == 0 {
				r.indeterminate(fmt.Sprintf("the lookup answered %s without naming a job", lr.Answer))
			}
			for _, ref := range refs {
				if _, seen := byID[ref.ID]; seen || r.has(ref.ID) {
					continue
				}
				// A job known only by its upstream task ID is the same job
				// the provider now names, not a second one, unless the
				// provider lists that ID too (its task IDs are job IDs).
				if i := r.unkeyedTask(); i >= 0 && !slices.ContainsFunc(refs, func(x provider.JobRef) bool { return x.ID == r.jobs[i].id }) {
					r.jobs[i].renameFrom, r.jobs[i].id, r.jobs[i].changed = r.jobs[i].id, ref.ID, true
					continue
				}
				r.jobs = append(r.jobs, jobView{id: ref.ID, status: ref.Answer.JobStatus()})
			}
		}
	}

	// Zero jobs after a send mean "none known", not "none": unless the
	// ledger or an authoritative lookup shows that the send started
	// nothing, the operation stays open and its reservation held.
	if op.SendCount > 0 && len(r.jobs) == 0 {
		started, err := w.maybeStarted(ctx, op)
		if err != nil {
			return false, err
		}
		switch {
		case !started || notFoundSafe:
			r.authoritative = true
		case c.CanLookup():
			r.indeterminate("the operation was sent and the provider's lookup finds no job, which does not prove that none started")
		default:
			r.indeterminate("the operation was sent, no remote job is known and the provider contract offers no lookup to show that none started")
		}
	}

	// The intended job is the bound one; every other job is a duplicate.
	intended := slices.IndexFunc(r.jobs, func(j jobView) bool { return j.intended })
	if intended < 0 && len(r.jobs) > 0 {
		intended = 0
		r.jobs[0].intended = true
		r.jobs[0].changed = true
	}
	for i := range r.jobs {
		if i != intended && !r.jobs[i].duplicate && countIntended(r.jobs) >= op.IntendedRemoteJobs {
			r.jobs[i].duplicate = true
			r.jobs[i].changed = true
			r.newDuplicates = append(r.newDuplicates, r.jobs[i].id)
		}
	}

	// Current status of every unfinished job.
	for i := range r.jobs {
		j := &r.jobs[i]
		if j.status.Terminal() {
			continue
		}
		st, err := w.jobStatus(ctx, c, up, op, j)
		if err != nil {
			r.indeterminate(fmt.Sprintf("job %s: %v", j.id, err))
			continue
		}
		if st != j.status {
			j.status, j.changed = st, true
		}
	}

	// Charges of every job.
	var charges []provider.Charge
	if c.Priced() {
		for _, j := range r.jobs {
			cs, err := c.Charges(ctx, up, j.id, op.ProviderKey(), op.Arguments)
			if err != nil {
				r.indeterminate(fmt.Sprintf("charges of job %s: %v", j.id, err))
				continue
			}
			charges = append(charges, cs...)
		}
	}
	return w.recordReconciliation(ctx, r, up, c, charges)
}

// jobStatus asks the provider (or the upstream's task) where a job is.
func (w *Worker) jobStatus(ctx context.Context, c *provider.Contract, up Upstream, op *ledger.Operation, j *jobView) (ledger.JobStatus, error) {
	if j.taskID != "" && up.OffersTasks() != taskwire.EraNone {
		t, err := up.GetTask(ctx, j.taskID)
		if err == nil {
			switch t.Status {
			case taskwire.StatusCompleted:
				return ledger.JobCompleted, nil
			case taskwire.StatusFailed:
				return ledger.JobFailed, nil
			case taskwire.StatusCancelled:
				return ledger.JobCancelled, nil
			default:
				return ledger.JobRunning, nil
			}
		}
		if !c.CanFetch() {
			return "", err
		}
	}
	if !c.CanFetch() && !c.CanLookup() {
		return j.status, nil
	}
	f, err := c.Fetch(ctx, up, j.id, op.ProviderKey(), op.Arguments)
	if err != nil {
		return "", err
	}
	return f.Answer.JobStatus(), nil
}

type jobView struct {
	id, taskID string
	renameFrom string
	status     ledger.JobStatus
	intended   bool
	duplicate  bool
	known      bool
	changed    bool
}

type reconciliation struct {
	op            *ledger.Operation
	jobs          []jobView
	newDuplicates []string
	lookup        string
	details       []string
	// authoritative: the operation was sent, no job is known, and that is
	// proven to mean that none started.
	authoritative bool
}

func (r *reconciliation) indeterminate(detail string) {
	r.lookup = "indeterminate"
	r.details = append(r.details, detail)
}

func (r *reconciliation) has(id string) bool {
	return slices.ContainsFunc(r.jobs, func(j jobView) bool { return j.id == id })
}

// unkeyedTask finds a job still keyed by its upstream task ID.
func (r *reconciliation) unkeyedTask() int {
	return slices.IndexFunc(r.jobs, func(j jobView) bool { return j.known && j.taskID != "" && j.id == j.taskID && j.renameFrom == "" })
}

func countIntended(jobs []jobView) int {
	n := 0
	for _, j := range jobs {
		if j.intended {
			n++
		}
	}
	return n
}

// recordReconciliation writes what reconciliation found in one transition.
func (w *Worker) recordReconciliation(ctx context.Context, r *reconciliation, up Upstream, c *provider.Contract, charges []provider.Charge) (bool, error) {
	op := r.op
	p := &ledger.TransitionParams{OperationRef: op.ID}
	for _, j := range r.jobs {
		if j.known && !j.changed {
			continue
		}
		u := &ledger.RemoteJobUpsert{Upstream: op.Upstream, Endpoint: up.Endpoint(), RemoteID: j.id, RenameFrom: j.renameFrom, Status: j.status,
			Intended: ptr(j.intended), Duplicate: ptr(j.duplicate)}
		if !j.known {
			u.Kind = KindProviderJob
			p.Events = append(p.Events, ledger.EventParams{Kind: ledger.EventRemoteJobObserved, Data: map[string]string{"remote_job_id": j.id, "status": string(j.status)}})
		}
		p.RemoteJobs = append(p.RemoteJobs, u)
	}
	for _, id := range r.newDuplicates {
		p.Events = append(p.Events, ledger.EventParams{Kind: ledger.EventDuplicateJob, Data: map[string]string{"remote_job_id": id}})
	}

	// Charges are added up in the operation's currency only: a charge in
	// another currency is recorded and flagged, never added.
	currency := op.Estimate.Currency
	final := money.Zero(currency)
	pending := false
	invoiced := map[string]bool{}
	var uncounted []string
	for _, ch := range charges {
		p.Charges = append(p.Charges, &ledger.ChargeUpsert{RemoteID: ch.JobID, ProviderChargeID: ch.ID, Amount: ch.Amount, Status: ch.Status, Source: "provider:" + c.Tool})
		switch ch.Status {
		case ledger.ChargeFinal:
			invoiced[ch.JobID] = true
			sum, err := final.Add(ch.Amount)
			if err != nil {
				uncounted = append(uncounted, ch.ID)
				continue
			}
			final = sum
		case ledger.ChargeRefunded:
			invoiced[ch.JobID] = true
		case ledger.ChargePending:
			pending = true
		}
	}
	if len(uncounted) > 0 {
		r.details = append(r.details, fmt.Sprintf("charge(s) %v cannot be added to the operation's %s total", uncounted, final.Currency))
	}

	allTerminal := true
	missingInvoice := false
	intendedDone := false
	for _, j := range r.jobs {
		if !j.status.Terminal() {
			allTerminal = false
		}
		if c.Priced() && j.status == ledger.JobCompleted && !invoiced[j.id] {
			missingInvoice = true
		}
		if j.intended && j.status == ledger.JobCompleted {
			intendedDone = true
		}
	}

	if op.ApprovalID != 0 {
		switch {
		case len(r.jobs) == 0 && op.State.Terminal() && r.lookup == "answered":
			p.Reservation = &ledger.ReservationUpdate{Status: ledger.ReservationReleased}
		case allTerminal && !pending && !missingInvoice && len(uncounted) == 0 && r.lookup == "answered":
			p.Reservation = &ledger.ReservationUpdate{Status: ledger.ReservationSettled, Settled: final}
		}
	}
	k := &ledger.AttemptKnowledge{}
	if len(r.jobs) > 0 {
		k.RemoteAccepted = ledger.Yes
	}
	if intendedDone {
		k.RemoteEffect = ledger.Yes
	}
	if final.Micros > 0 {
		k.ChargeStatus = ledger.Yes
	} else if allTerminal && !pending && c.Priced() && !missingInvoice && r.lookup == "answered" {
		k.ChargeStatus = ledger.No
	}
	p.Creator = k

	// A job the provider started for an operation whose cancellation was
	// requested is asked to stop as soon as it is seen.
	cancels := 0
	if !op.CancelRequestedAt.IsZero() {
		for _, j := range r.jobs {
			if !j.known && j.status != ledger.JobCancelled {
				p.Jobs = append(p.Jobs, job(CancelArgs{Operation: op.ID, Job: j.id}, 0))
				cancels++
			}
		}
	}

	complete := allTerminal && !pending && !missingInvoice && len(uncounted) == 0 && r.lookup == "answered" && op.State.Terminal() && cancels == 0
	detail := ""
	if len(r.details) > 0 {
		detail = fmt.Sprint(r.details)
	}
	data := map[string]any{
		"lookup": r.lookup, "detail": detail, "complete": complete, "jobs": len(r.jobs), "duplicates": len(r.newDuplicates),
		"final_cost": final.String(), "missing_invoice": missingInvoice,
	}
	if r.authoritative {
		data["authoritative"] = true
	}
	p.Events = append(p.Events, ledger.EventParams{Kind: ledger.EventReconciled, Data: data})
	out, err := w.store.Transition(ctx, p)
	if err != nil {
		return false, fmt.Errorf("record reconciliation: %w", err)
	}
	// The ceiling is checked after this operation's charges are recorded:
	// of operations under one approval settling at the same time, the last
	// to commit then sees all of them.
	if op.ApprovalID != 0 && !out.CostBreach {
		breach, err := w.costBreach(ctx, op, final, uncounted)
		if err != nil {
			return false, err
		}
		if breach != nil {
			if _, err := w.store.Transition(ctx, &ledger.TransitionParams{
				OperationRef: op.ID, CostBreach: true, Events: []ledger.EventParams{{Kind: ledger.EventCostBoundaryBreach, Data: breach}},
			}); err != nil {
				return false, fmt.Errorf("record a cost boundary breach: %w", err)
			}
		}
	}
	w.logger(op).Info("reconciled", "lookup", r.lookup, "jobs", len(r.jobs), "final_cost", final.String(), "complete", complete)
	if complete {
		return false, nil
	}
	// Keep looking while something is open, but not beyond retention.
	return op.EndedAt.IsZero() || w.clock().Sub(op.EndedAt) < w.cfg.Retention, nil
}

// costBreach compares what the whole approval is committed to — the other
// operations' held and settled reservations under it plus this
// operation's final charges — with its ceiling. It returns the breach's
// event data, or nil when the ceiling holds. Amounts that cannot be added
// up (another currency) are a breach too: the ceiling cannot be shown to
// hold.
func (w *Worker) costBreach(ctx context.Context, op *ledger.Operation, final money.Amount, uncounted []string) (map[string]any, error) {
	a, err := w.store.ApprovalGet(ctx, op.ApprovalID)
	if err != nil {
		return nil, err
	}
	rs, err := w.store.ReservationList(ctx, op.ApprovalID)
	if err != nil {
		return nil, err
	}
	var others []*ledger.Reservation
	for _, r := range rs {
		if r.OperationRef != op.ID {
			others = append(others, r)
		}
	}
	used := policy.Committed(others, a.MaxTotalCost.Currency)
	total, err := used.Spend.Add(final)
	switch {
	case err != nil || len(used.Uncounted) > 0 || len(uncounted) > 0:
		return map[string]any{
			"reason": "amounts_not_comparable", "final_cost": final.Display(), "ceiling": a.MaxTotalCost.Display(),
			"uncounted_charges": uncounted, "uncounted_reservations": used.Uncounted,
		}, nil
	case total.Micros > a.MaxTotalCost.Micros:
		over, err := total.Sub(a.MaxTotalCost)
		if err != nil {
			return nil, err
		}
		return map[string]any{
			"final_cost": final.String(), "approval_total": total.String(), "ceiling": a.MaxTotalCost.String(), "over_by": over.String(),
		}, nil
	}
	return nil, nil
}

// maybeStarted reports whether the operation's latest send may have
// started work: false only when the ledger shows that the upstream refused
// it before any work began, or that it never left the gateway.
func (w *Worker) maybeStarted(ctx context.Context, op *ledger.Operation) (bool, error) {
	if op.SendCount == 1 {
		// With one send only, what is known of the creating attempt is
		// known of that send (ledgers from before the events said so).
		atts, err := w.store.AttemptList(ctx, op.ID)
		if err != nil {
			return false, err
		}
		for _, a := range atts {
			if a.OperationRef == op.ID && a.Decision == ledger.DecisionCreated && a.RemoteAccepted == ledger.No {
				return false, nil
			}
		}
	}
	evs, err := w.store.EventList(ctx, op.ID)
	if err != nil {
		return false, err
	}
	for i := len(evs) - 1; i >= 0; i-- {
		var d struct {
			Answer         string `json:"answer"`
			NothingStarted bool   `json:"nothing_started"`
		}
		_ = json.Unmarshal(evs[i].Data, &d)
		switch {
		case evs[i].Kind == ledger.EventSendStarted:
			return true, nil
		case evs[i].Kind == ledger.EventFailed && d.NothingStarted, evs[i].Kind == ledger.EventLookup && d.Answer == "not_sent":
			return false, nil
		}
	}
	return true, nil
}
