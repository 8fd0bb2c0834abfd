package worker

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/riverqueue/river"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/provider"
)

// maxCancelTries is how many times a cancellation the provider failed to
// take is tried before only the ledger's record of the failure remains.
const maxCancelTries = 5

// cancelRemote asks the provider to cancel the operation's jobs (or one
// job) and records, separately, that cancellation was sent and whether the
// effect was reversed. A job that already finished is asked too: the
// provider's answer is the evidence that its effect stands. When the
// provider fails to take a cancellation, the job runs again (attempt counts
// River's runs), up to maxCancelTries, asking only where it failed.
func (w *Worker) cancelRemote(ctx context.Context, opRef int64, only string, attempt int) error {
	op, err := w.store.OperationGet(ctx, &ledger.OperationGetParams{ID: opRef})
	if err != nil {
		return err
	}
	if op, err = w.opened(op); err != nil {
		return err
	}
	ctx, span := w.step(ctx, op, "taskgate.cancel")
	defer span.End()
	p := &ledger.TransitionParams{OperationRef: op.ID, Enqueue: []river.InsertManyParams{job(ReconcileArgs{Operation: op.ID}, 0)}}
	if op.SendCount == 0 && op.State.Terminal() {
		// Cancelled before anything was sent: no remote job can exist, and
		// nothing stays reserved for one.
		p.Reservation = &ledger.ReservationUpdate{Status: ledger.ReservationReleased}
		p.Creator = &ledger.AttemptKnowledge{RemoteAccepted: ledger.No, RemoteEffect: ledger.No, ChargeStatus: ledger.No}
	}
	c := w.catalog.ForOperation(op.Upstream, op.Tool, op.Contract)
	up, ok := w.upstreams.Upstream(op.Upstream, op.Tenant)
	if c == nil || !ok {
		msg := fmt.Sprintf("the configuration no longer has consequential tool %s.%s; its provider was not asked to cancel", op.Upstream, op.Tool)
		if op.SendCount > 0 {
			p.Events = append(p.Events, ledger.EventParams{Kind: ledger.EventCancelSent, Data: ledger.CancelSentData{Error: msg}})
		}
		if _, err := w.store.Transition(ctx, p); err != nil {
			return err
		}
		return river.JobCancel(fmt.Errorf("operation %s: %s", op.OperationID, msg))
	}
	jobs, err := w.store.RemoteJobList(ctx, op.ID)
	if err != nil {
		return err
	}
	// Every run reads what earlier ones recorded: a job whose cancellation
	// the provider took is not asked again, however many cancellations
	// name it (a retry, the record of a job found after the request).
	evs, err := w.store.EventList(ctx, op.ID)
	if err != nil {
		return err
	}
	log := w.logger(op)
	outcomes := cancelOutcomes(log, evs)
	targets := map[string]*ledger.RemoteJob{}
	for _, j := range jobs {
		if (only == "" || j.RemoteJobID == only) && !outcomes.taken(j.RemoteJobID) {
			targets[j.RemoteJobID] = j
		}
	}
	// A send that started without a binding may still have created a job.
	if only == "" && len(jobs) == 0 && op.SendCount > 0 && c.CanLookup() {
		if lr := c.Lookup(ctx, up, op.ProviderKey(), op.Arguments); lr.RemoteJobID != "" && !outcomes.taken(lr.RemoteJobID) {
			targets[lr.RemoteJobID] = &ledger.RemoteJob{RemoteJobID: lr.RemoteJobID, Kind: ledger.JobKindProviderJob, Status: lr.Answer.JobStatus()}
		}
	}
	var failed []string
	for id, j := range targets {
		if j.Status == ledger.JobCancelled {
			continue
		}
		u := &ledger.RemoteJobUpsert{Upstream: op.Upstream, Endpoint: up.Endpoint(), RemoteJobID: id, Kind: j.Kind, CancelRequested: true}
		var res *provider.CancelResult
		switch {
		case c.CanCancel():
			res, err = c.Cancel(ctx, up, id, op.ProviderKey(), op.Arguments)
		case j.UpstreamTaskID != "":
			err = up.CancelTask(ctx, j.UpstreamTaskID)
			res = &provider.CancelResult{EffectReversed: ledger.Unknown, Detail: "tasks/cancel acknowledged"}
		default:
			err = fmt.Errorf("the provider contract defines no cancel and job %s is not an upstream task", id)
		}
		if err != nil {
			p.Events = append(p.Events, ledger.EventParams{Kind: ledger.EventCancelSent, Data: ledger.CancelSentData{Error: err.Error(), RemoteJobID: id}})
			outcomes.add(id, &JobCancel{Error: err.Error()})
			log.Warn("cancel failed", "remote_job_id", id, "err", err, "attempt", attempt)
			p.RemoteJobs = append(p.RemoteJobs, u)
			if c.CanCancel() || j.UpstreamTaskID != "" {
				failed = append(failed, id)
			}
			continue
		}
		u.EffectReversed = res.EffectReversed
		p.Events = append(p.Events, ledger.EventParams{Kind: ledger.EventCancelSent, Data: ledger.CancelSentData{Detail: new(res.Detail), RemoteJobID: id}})
		outcomes.add(id, &JobCancel{Taken: true, EffectReversed: res.EffectReversed, Detail: res.Detail})
		switch res.EffectReversed {
		case ledger.Yes:
			p.Events = append(p.Events, ledger.EventParams{Kind: ledger.EventEffectReversed, Data: ledger.EffectReversedData{RemoteJobID: id}})
			if j.Duplicate {
				u.DuplicateResolved = "cancelled"
			}
		case ledger.No:
			p.Events = append(p.Events, ledger.EventParams{Kind: ledger.EventEffectNotReversed, Data: ledger.EffectNotReversedData{
				Detail: res.Detail, JobStatus: j.Status, RemoteJobID: id,
			}})
		}
		p.RemoteJobs = append(p.RemoteJobs, u)
	}
	again := len(failed) > 0 && attempt < maxCancelTries && ctx.Err() == nil
	if op.State == ledger.StateCancelled && op.SendCount > 0 {
		// The task says what came of its cancellation, as the provider
		// answered it, not only that it was asked.
		p.StatusMessage = new(CancelStatus(true, outcomes, again))
	}
	if _, err := w.store.Transition(ctx, p); err != nil {
		return err
	}
	if again {
		return fmt.Errorf("the provider did not take the cancellation of job(s) %v of operation %s; asking again", failed, op.OperationID)
	}
	return nil
}

// JobCancel is what the ledger records of the cancellation of one remote
// job: whether the provider took it, whether its effect was reversed, and
// the provider's detail or the error that kept it from being taken.
type JobCancel struct {
	Taken          bool
	EffectReversed ledger.Knowledge
	Detail         string
	Error          string
}

// CancelOutcomes are the jobs' cancellations by remote job ID, the latest
// record of each.
type CancelOutcomes map[string]*JobCancel

func (o CancelOutcomes) add(id string, c *JobCancel) {
	if prev := o[id]; prev != nil && prev.Taken && !c.Taken {
		// A later failure does not undo a cancellation the provider took.
		return
	}
	o[id] = c
}

func (o CancelOutcomes) taken(id string) bool { return o[id] != nil && o[id].Taken }

// cancelOutcomes reads the jobs' cancellations from an operation's events.
// A record that cannot be read proves nothing, as in the receipt: it is
// logged, and its job is asked again.
func cancelOutcomes(log *slog.Logger, evs []*ledger.Event) CancelOutcomes {
	out := CancelOutcomes{}
	for _, e := range evs {
		switch e.Kind {
		case ledger.EventCancelSent:
			d, err := ledger.DecodeEventData[ledger.CancelSentData](e)
			if err != nil {
				log.Warn("skipping an unreadable event; it proves nothing", "err", err)
				continue
			}
			if d.RemoteJobID == "" {
				continue
			}
			c := &JobCancel{Taken: d.Error == "", Error: d.Error, EffectReversed: ledger.Unknown}
			if d.Detail != nil {
				c.Detail = *d.Detail
			}
			out.add(d.RemoteJobID, c)
		case ledger.EventEffectReversed:
			if d, err := ledger.DecodeEventData[ledger.EffectReversedData](e); err == nil && out[d.RemoteJobID] != nil {
				out[d.RemoteJobID].EffectReversed = ledger.Yes
			}
		case ledger.EventEffectNotReversed:
			if d, err := ledger.DecodeEventData[ledger.EffectNotReversedData](e); err == nil && out[d.RemoteJobID] != nil {
				out[d.RemoteJobID].EffectReversed = ledger.No
			}
		}
	}
	return out
}

// CancelStatus is the status message of a task cancelled by request: what
// came of asking the provider to stop each job. sent says whether the
// call was sent to the provider at all; again, whether a cancellation it
// did not take is being asked again.
func CancelStatus(sent bool, outcomes CancelOutcomes, again bool) string {
	if !sent {
		return "cancelled by request before anything was sent to the provider; nothing started"
	}
	if len(outcomes) == 0 {
		return "cancelled by request; the provider is being asked to stop"
	}
	var parts []string
	for _, id := range slices.Sorted(maps.Keys(outcomes)) {
		c := outcomes[id]
		switch {
		case !c.Taken && again:
			parts = append(parts, fmt.Sprintf("the provider could not be asked to stop job %s (%s); asking again", id, brief(c.Error)))
		case !c.Taken:
			parts = append(parts, fmt.Sprintf("the provider could not be asked to stop job %s (%s); cancel it at the provider", id, brief(c.Error)))
		case c.EffectReversed == ledger.Yes && c.Detail != "":
			// The provider's words say what was reversed, such as a refunded charge.
			parts = append(parts, fmt.Sprintf("the provider stopped job %s and its effect was reversed (%s)", id, brief(c.Detail)))
		case c.EffectReversed == ledger.Yes:
			parts = append(parts, fmt.Sprintf("the provider stopped job %s and its effect was reversed", id))
		case c.EffectReversed == ledger.No:
			parts = append(parts, fmt.Sprintf("the provider was asked to stop job %s, but its effect stands (%s)", id, brief(c.Detail)))
		default:
			parts = append(parts, fmt.Sprintf("the provider took the cancellation of job %s; whether its effect was reversed is not known yet", id))
		}
	}
	return "cancelled by request; " + strings.Join(parts, "; ")
}

// KeptCancelStatus is the status message of an operation whose client
// asked to cancel it after its call was sent, under client_cancel:
// before_send. It stays while the operation runs (runningStatus).
const KeptCancelStatus = "the client asked to cancel, but the call was already sent to the provider and this tool's policy (client_cancel: before_send) " +
	"keeps its job running to its end; its result and charges are reconciled as usual"

// runningStatus is the status message of a running operation whose
// upstream task now says provider: the provider's words, after the
// reason a kept cancel did not stop the operation, which the client that
// asked must go on seeing. It returns current when nothing changes.
func runningStatus(current, provider string) string {
	if provider == "" {
		return current
	}
	if strings.HasPrefix(current, KeptCancelStatus) {
		return KeptCancelStatus + "; the provider says: " + provider
	}
	return provider
}

// briefLen bounds what a status message quotes of a provider's words.
const briefLen = 200

// brief is s cut to at most briefLen bytes, on a character boundary.
func brief(s string) string {
	if len(s) <= briefLen {
		return s
	}
	cut := briefLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// expire frees the operation IDs of operations that ended longer ago than
// the retention period, and erases the secret arguments they still hold.
// The operations stay in the ledger. It also deletes the tombstones of
// archived operations whose IDs are free again.
func (w *Worker) expire(ctx context.Context) error {
	for {
		ops, err := w.store.OperationsEndedBefore(ctx, w.clock().Add(-w.cfg.Retention.OperationIDs), 500)
		if err != nil {
			return err
		}
		now := w.clock()
		for _, op := range ops {
			if _, err := w.store.Transition(ctx, &ledger.TransitionParams{
				OperationRef: op.ID, ExpireKey: true, EraseSecrets: ledger.SecretsErasable(op, false, now, w.cfg.Retention.OperationIDs),
			}); err != nil {
				return err
			}
		}
		if len(ops) < 500 {
			break
		}
	}
	for {
		n, err := w.store.TombstonesExpire(ctx, w.clock(), 500)
		if err != nil || n < 500 {
			return err
		}
	}
}
