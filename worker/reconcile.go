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
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/receipt/issue"
	"github.com/taskgate/taskgate/reconcile"
	"github.com/taskgate/taskgate/taskwire"
	"github.com/taskgate/taskgate/telemetry"
)

// Reconcile queries the provider about every job the operation's ID and
// known job IDs lead to, assesses what it finds with [reconcile.Assess] and
// records it: every job, status and charge, the jobs the assessment makes
// duplicates, the settlement or release of the spend reservation, and a
// cost boundary breach when [policy.CostBreach] finds one. It reports
// whether anything is still open (so that it should run again later). The
// outcome of the provider lookup is recorded as a reconciled event with
// data {"lookup": "answered"|"indeterminate", "detail": …}, which receipts
// read.
func (w *Worker) Reconcile(ctx context.Context, opRef int64) (open bool, err error) {
	op, err := w.store.OperationGet(ctx, &ledger.OperationGetParams{ID: opRef})
	if err != nil {
		return false, err
	}
	// The provider's lookups and charges may take the call's arguments,
	// secret ones included.
	if op, err = w.opened(op); err != nil {
		return false, err
	}
	ctx, span := w.step(ctx, op, "taskgate.reconcile")
	defer span.End()
	c := w.catalog.ForOperation(op.Upstream, op.Tool, op.Contract)
	up, ok := w.upstreams.Upstream(op.Upstream, op.Tenant)
	if c == nil || !ok {
		_, err := w.store.Transition(ctx, &ledger.TransitionParams{OperationRef: op.ID, Events: []ledger.EventParams{{
			Kind: ledger.EventReconciled, Data: ledger.ReconciledData{Complete: false, Detail: "the configuration no longer has this tool", Lookup: reconcile.LookupIndeterminate},
		}}})
		return false, err
	}
	known, err := w.store.RemoteJobList(ctx, op.ID)
	if err != nil {
		return false, err
	}

	r := &reconciliation{op: op, lookup: reconcile.LookupAnswered}
	byID := map[string]*ledger.RemoteJob{}
	for _, j := range known {
		byID[j.RemoteJobID] = j
		r.jobs = append(r.jobs, jobView{id: j.RemoteJobID, taskID: j.UpstreamTaskID, attempt: j.AttemptRef, status: j.Status, intended: j.Intended, duplicate: j.Duplicate, known: true})
	}

	// Every job the provider holds for this operation ID.
	notFoundSafe := false
	if c.CanLookup() && op.SendCount > 0 {
		lctx, lspan := w.part(ctx, op, "taskgate.lookup")
		lr := c.Lookup(lctx, up, op.ProviderKey(), op.Arguments)
		lspan.End()
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
			if len(refs) == 0 && lr.RemoteJobID != "" {
				refs = []provider.JobRef{{ID: lr.RemoteJobID, Answer: lr.Answer}}
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

	// Whether a send without a known job may have started one is read
	// from the ledger.
	var attempts []*ledger.Attempt
	var events []*ledger.Event
	if op.SendCount > 0 && len(r.jobs) == 0 {
		if attempts, err = w.store.AttemptList(ctx, op.ID); err != nil {
			return false, err
		}
	}
	// The events say what the provider's records were when last seen.
	if events, err = w.store.EventList(ctx, op.ID); err != nil {
		return false, err
	}
	r.seen = seenRecords(events)

	// Current status of every unfinished job, and the provider's record of
	// every job whose status it has not shown yet.
	for i := range r.jobs {
		j := &r.jobs[i]
		if j.status.Terminal() {
			if _, seen := r.seen[recordKey{j.id, ledger.RecordStatus}]; seen {
				continue
			}
			// The ledger knows how it ended; the provider's own word on
			// it is evidence only, and an error reading it changes nothing.
			if _, rec, err := w.jobStatus(ctx, c, up, op, j); err == nil && rec != nil {
				r.record(op, j.id, ledger.RecordStatus, rec.tool, rec.answer)
			}
			continue
		}
		st, rec, err := w.jobStatus(ctx, c, up, op, j)
		if err != nil {
			r.indeterminate(fmt.Sprintf("job %s: %v", j.id, err))
			continue
		}
		if rec != nil {
			r.record(op, j.id, ledger.RecordStatus, rec.tool, rec.answer)
		}
		if st != j.status {
			j.status, j.changed = st, true
		}
	}

	// Charges of every job.
	var charges []provider.Charge
	if c.Priced() {
		for _, j := range r.jobs {
			cctx, cspan := w.part(ctx, op, "taskgate.fetch_charges")
			cspan.SetAttributes(telemetry.AttrRemoteJob.String(j.id))
			list, err := c.Charges(cctx, up, j.id, op.ProviderKey(), op.Arguments)
			cspan.End()
			if err != nil {
				r.indeterminate(fmt.Sprintf("charges of job %s: %v", j.id, err))
				continue
			}
			r.record(op, j.id, ledger.RecordCharges, list.Tool, list.Record)
			charges = append(charges, list.Charges...)
		}
	}

	facts := &reconcile.Facts{
		Operation: op, Currency: op.Estimate.Currency, Priced: c.Priced(),
		Indeterminate: r.lookup == reconcile.LookupIndeterminate, NotFoundProven: notFoundSafe,
		Attempts: attempts, Events: events,
	}
	for _, j := range r.jobs {
		facts.Jobs = append(facts.Jobs, reconcile.Job{ID: j.id, Attempt: j.attempt, Status: j.status, Intended: j.intended, Duplicate: j.duplicate, New: !j.known})
	}
	for _, ch := range charges {
		facts.Charges = append(facts.Charges, reconcile.Charge{ID: ch.ID, RemoteJobID: ch.RemoteJobID, Amount: ch.Amount, Status: ch.Status})
	}
	out := reconcile.Assess(facts)
	// Zero jobs after a send mean "none known", not "none": unless the
	// ledger or an authoritative lookup shows that the send started
	// nothing, the operation stays open and its reservation held.
	if out.SentWithoutKnownJob {
		if c.CanLookup() {
			r.indeterminate("the operation was sent and the provider's lookup finds no job, which does not prove that none started")
		} else {
			r.indeterminate("the operation was sent, no remote job is known and the provider contract offers no lookup to show that none started")
		}
	}
	return w.recordReconciliation(ctx, r, up, c, charges, out)
}

// jobStatus asks the provider (or the upstream's task) where a job is, and
// returns its answer as the evidence of that status (nil when none was
// asked).
func (w *Worker) jobStatus(ctx context.Context, c *provider.Contract, up Upstream, op *ledger.Operation, j *jobView) (ledger.JobStatus, *statusRecord, error) {
	if era := up.OffersTasks(); j.taskID != "" && era != taskwire.EraNone {
		t, err := up.GetTask(ctx, j.taskID)
		if err == nil {
			// The evidence is the task as the provider's era spells it on
			// the wire, not this gateway's decoding of it.
			answer, _ := taskwire.MarshalTask(t, era)
			rec := &statusRecord{tool: "tasks/get", answer: answer}
			switch t.Status {
			case taskwire.StatusCompleted:
				return ledger.JobCompleted, rec, nil
			case taskwire.StatusFailed:
				return ledger.JobFailed, rec, nil
			case taskwire.StatusCancelled:
				return ledger.JobCancelled, rec, nil
			default:
				return ledger.JobRunning, rec, nil
			}
		}
		if !c.CanFetch() {
			return "", nil, err
		}
	}
	if !c.CanFetch() && !c.CanLookup() {
		return j.status, nil, nil
	}
	f, err := c.Fetch(ctx, up, j.id, op.ProviderKey(), op.Arguments)
	if err != nil {
		return "", nil, err
	}
	return f.Answer.JobStatus(), &statusRecord{tool: f.Tool, answer: f.Record}, nil
}

// statusRecord is the answer that gave a job's status, and its tool.
type statusRecord struct {
	tool   string
	answer json.RawMessage
}

// recordKey names one kind of provider record of one job.
type recordKey struct {
	job  string
	kind ledger.ProviderRecordKind
}

// seenRecords is the latest provider record of each job and kind that the
// operation's reconciliations recorded.
func seenRecords(events []*ledger.Event) map[recordKey]string {
	out := map[recordKey]string{}
	for _, e := range events {
		if e.Kind != ledger.EventReconciled {
			continue
		}
		d, err := ledger.DecodeEventData[ledger.ReconciledData](e)
		if err != nil {
			continue
		}
		for _, rec := range d.Evidence {
			out[recordKey{rec.RemoteJobID, rec.Kind}] = rec.Answer
		}
	}
	return out
}

type jobView struct {
	id, taskID string
	renameFrom string
	attempt    int64
	status     ledger.JobStatus
	intended   bool
	duplicate  bool
	known      bool
	changed    bool
}

type reconciliation struct {
	op      *ledger.Operation
	jobs    []jobView
	lookup  string
	details []string
	// seen is the provider records recorded before; evidence the ones
	// this pass read that differ from them.
	seen     map[recordKey]string
	evidence []ledger.ProviderRecord
}

// record keeps the provider's answer about a job as evidence unless it
// says what the ledger already has. Secret argument values it may echo are
// redacted first; once they are erased they are no longer known, and an
// answer is not kept at all.
func (r *reconciliation) record(op *ledger.Operation, job string, kind ledger.ProviderRecordKind, tool string, answer json.RawMessage) {
	if len(answer) == 0 || op.SecretsAtRest == ledger.SecretsErased && len(op.SecretArguments) > 0 {
		return
	}
	text := ledger.ProviderAnswer(ledger.RedactSecrets(answer, op.Arguments, op.SecretArguments))
	k := recordKey{job, kind}
	if prev, ok := r.seen[k]; ok && prev == text {
		return
	}
	r.seen[k] = text
	r.evidence = append(r.evidence, ledger.ProviderRecord{RemoteJobID: job, Kind: kind, Tool: tool, Answer: text})
}

func (r *reconciliation) indeterminate(detail string) {
	r.lookup = reconcile.LookupIndeterminate
	r.details = append(r.details, detail)
}

func (r *reconciliation) has(id string) bool {
	return slices.ContainsFunc(r.jobs, func(j jobView) bool { return j.id == id })
}

// unkeyedTask finds a job still keyed by its upstream task ID.
func (r *reconciliation) unkeyedTask() int {
	return slices.IndexFunc(r.jobs, func(j jobView) bool { return j.known && j.taskID != "" && j.id == j.taskID && j.renameFrom == "" })
}

// recordReconciliation writes what reconciliation found, and what out
// makes of it, in one transition.
func (w *Worker) recordReconciliation(ctx context.Context, r *reconciliation, up Upstream, c *provider.Contract, charges []provider.Charge, out reconcile.Outcome) (bool, error) {
	op := r.op
	p := &ledger.TransitionParams{OperationRef: op.ID}
	var duplicates []string
	missingInvoice := false
	for i, j := range r.jobs {
		o := out.Jobs[i]
		if o.NewDuplicate {
			duplicates = append(duplicates, j.id)
		}
		missingInvoice = missingInvoice || o.Uninvoiced
		if j.known && !j.changed && o.Intended == j.intended && o.Duplicate == j.duplicate {
			continue
		}
		u := &ledger.RemoteJobUpsert{Upstream: op.Upstream, Endpoint: up.Endpoint(), RemoteJobID: j.id, RenameFrom: j.renameFrom, Status: j.status,
			Intended: new(o.Intended), Duplicate: new(o.Duplicate)}
		if !j.known {
			u.Kind = ledger.JobKindProviderJob
			p.Events = append(p.Events, ledger.EventParams{Kind: ledger.EventRemoteJobObserved, Data: ledger.RemoteJobData{RemoteJobID: j.id, Status: j.status}})
		}
		p.RemoteJobs = append(p.RemoteJobs, u)
	}
	for _, id := range duplicates {
		p.Events = append(p.Events, ledger.EventParams{Kind: ledger.EventDuplicateJob, Data: ledger.DuplicateJobData{RemoteJobID: id}})
	}

	for _, ch := range charges {
		p.Charges = append(p.Charges, &ledger.ChargeUpsert{RemoteJobID: ch.RemoteJobID, ProviderChargeID: ch.ID, Amount: ch.Amount, Status: ch.Status, Source: "provider:" + c.Tool, Kind: ch.Kind})
	}
	final := out.Totals.Final
	uncounted := out.Totals.UncountedFinal()
	if len(uncounted) > 0 {
		r.details = append(r.details, fmt.Sprintf("charge(s) %v cannot be added to the operation's %s total", uncounted, final.Currency))
	}

	switch out.Reservation {
	case reconcile.Release:
		p.Reservation = &ledger.ReservationUpdate{Status: ledger.ReservationReleased}
	case reconcile.Settle:
		p.Reservation = &ledger.ReservationUpdate{Status: ledger.ReservationSettled, Settled: final}
	}
	p.Creator = &ledger.AttemptKnowledge{RemoteAccepted: out.Accepted, RemoteEffect: out.Effect, ChargeStatus: out.Charged}

	// A job the provider started for an operation whose cancellation was
	// requested is asked to stop as soon as it is seen.
	for i, j := range r.jobs {
		if out.Jobs[i].Cancel {
			p.Enqueue = append(p.Enqueue, job(CancelArgs{Operation: op.ID, Job: j.id}, 0))
		}
	}

	complete := out.Status == reconcile.Complete && out.Cancels() == 0
	detail := ""
	if len(r.details) > 0 {
		detail = fmt.Sprint(r.details)
	}
	data := ledger.ReconciledData{
		Authoritative: out.Authoritative, Complete: complete, Detail: detail, Duplicates: new(len(duplicates)),
		FinalCost: final.String(), Jobs: new(len(r.jobs)), Lookup: r.lookup, MissingInvoice: new(missingInvoice),
		Evidence: r.evidence,
	}
	p.Events = append(p.Events, ledger.EventParams{Kind: ledger.EventReconciled, Data: data})
	p.EraseSecrets = ledger.SecretsErasable(op, complete, w.clock(), w.cfg.Retention.OperationIDs)
	res, err := w.store.Transition(ctx, p)
	if err != nil {
		return false, fmt.Errorf("record reconciliation: %w", err)
	}
	// The ceiling is checked after this operation's charges are recorded:
	// of operations under one approval settling at the same time, the last
	// to commit then sees all of them.
	if op.ApprovalID != 0 && !res.CostBreach {
		if err := w.recordCostBreach(ctx, op, final, uncounted); err != nil {
			return false, err
		}
	}
	w.logger(op).Info("reconciled", "lookup", r.lookup, "jobs", len(r.jobs), "final_cost", final.String(), "complete", complete)
	w.issueReceipt(ctx, op, c.Priced())
	if complete {
		return false, nil
	}
	// Keep looking while something is open, but not beyond retention.
	return op.EndedAt.IsZero() || w.clock().Sub(op.EndedAt) < w.cfg.Retention.OperationIDs, nil
}

// recordCostBreach flags the operation when [policy.CostBreach] finds that
// its final cost, with what the rest of its approval commits, breaches the
// approval's ceiling.
func (w *Worker) recordCostBreach(ctx context.Context, op *ledger.Operation, final money.Amount, uncounted []string) error {
	a, err := w.store.ApprovalGet(ctx, op.ApprovalID)
	if err != nil {
		return err
	}
	rs, err := w.store.ReservationList(ctx, op.ApprovalID)
	if err != nil {
		return err
	}
	b, err := policy.CostBreach(a, rs, op.ID, final, uncounted)
	if err != nil || b == nil {
		return err
	}
	data := ledger.CostBoundaryBreachData{
		ApprovalTotal: b.Total.String(), Ceiling: b.Ceiling.String(), FinalCost: b.Final.String(), OverBy: b.Over.String(),
	}
	if b.NotComparable {
		data = ledger.CostBoundaryBreachData{
			Ceiling: b.Ceiling.Display(), FinalCost: b.Final.Display(), Reason: "amounts_not_comparable",
			UncountedCharges: b.UncountedCharges, UncountedReservations: b.UncountedReservations,
		}
	}
	if _, err := w.store.Transition(ctx, &ledger.TransitionParams{
		OperationRef: op.ID, CostBreach: true, Events: []ledger.EventParams{{Kind: ledger.EventCostBoundaryBreach, Data: data}},
	}); err != nil {
		return fmt.Errorf("record a cost boundary breach: %w", err)
	}
	return nil
}

// issueReceipt issues op's receipt once its assessment is final, or its
// next version when what this pass recorded changed it. A receipt that
// cannot be issued now (no signing key, or one this gateway cannot open)
// is logged and left provisional: reconciliation itself stands, and the
// next pass, or taskgate reconcile, issues it.
func (w *Worker) issueReceipt(ctx context.Context, op *ledger.Operation, priced bool) {
	log := w.logger(op)
	stored, err := w.store.OperationGet(ctx, &ledger.OperationGetParams{ID: op.ID})
	if err != nil {
		log.Warn("the receipt could not be issued: the operation could not be read back", "err", err)
		return
	}
	res, err := issue.New(w.store, w.secrets).Issue(ctx, stored, &receipt.LoadOptions{Priced: priced, Now: w.clock()})
	switch {
	case err != nil:
		log.Warn("the receipt could not be issued; it stays provisional until a pass can sign it", "err", err)
	case res.Outcome == issue.NoKey:
		log.Info("the receipt is final but not issued: the ledger has no active signing key (taskgate signing-keys create)")
	case res.Outcome == issue.Issued:
		log.Info("receipt issued", "version", res.Version.Version, "digest", res.Version.Digest, "kid", res.Version.KeyID)
	}
}
