package worker

import (
	"context"
	"fmt"
	"log/slog"

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
	p := &ledger.TransitionParams{OperationRef: op.ID, Enqueue: []river.InsertManyParams{job(ReconcileArgs{Operation: op.ID}, 0)}}
	if op.SendCount == 0 && op.State.Terminal() {
		// Cancelled before anything was sent: no remote job can exist, and
		// nothing stays reserved for one.
		p.Reservation = &ledger.ReservationUpdate{Status: ledger.ReservationReleased}
		p.Creator = &ledger.AttemptKnowledge{RemoteAccepted: ledger.No, RemoteEffect: ledger.No, ChargeStatus: ledger.No}
	}
	c := w.catalog.Contract(op.Upstream, op.Tool)
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
	var evs []*ledger.Event
	if attempt > 1 {
		if evs, err = w.store.EventList(ctx, op.ID); err != nil {
			return err
		}
	}
	// A retry asks again only where the provider did not take the
	// cancellation; a new request asks every job.
	taken := cancelsTaken(w.logger(op), evs)
	targets := map[string]*ledger.RemoteJob{}
	for _, j := range jobs {
		if (only == "" || j.RemoteJobID == only) && !taken[j.RemoteJobID] {
			targets[j.RemoteJobID] = j
		}
	}
	// A send that started without a binding may still have created a job.
	if only == "" && len(jobs) == 0 && op.SendCount > 0 && c.CanLookup() {
		if lr := c.Lookup(ctx, up, op.ProviderKey(), op.Arguments); lr.RemoteJobID != "" && !taken[lr.RemoteJobID] {
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
			w.logger(op).Warn("cancel failed", "remote_job_id", id, "err", err, "attempt", attempt)
			p.RemoteJobs = append(p.RemoteJobs, u)
			if c.CanCancel() || j.UpstreamTaskID != "" {
				failed = append(failed, id)
			}
			continue
		}
		u.EffectReversed = res.EffectReversed
		p.Events = append(p.Events, ledger.EventParams{Kind: ledger.EventCancelSent, Data: ledger.CancelSentData{Detail: new(res.Detail), RemoteJobID: id}})
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
	if _, err := w.store.Transition(ctx, p); err != nil {
		return err
	}
	if len(failed) > 0 && attempt < maxCancelTries && ctx.Err() == nil {
		return fmt.Errorf("the provider did not take the cancellation of job(s) %v of operation %s; asking again", failed, op.OperationID)
	}
	return nil
}

// cancelsTaken lists the jobs whose cancellation the provider already took.
// A record that cannot be read proves nothing, as in the receipt: it is
// logged, and its job is asked again.
func cancelsTaken(log *slog.Logger, evs []*ledger.Event) map[string]bool {
	taken := map[string]bool{}
	for _, e := range evs {
		if e.Kind != ledger.EventCancelSent {
			continue
		}
		d, err := ledger.DecodeEventData[ledger.CancelSentData](e)
		if err != nil {
			log.Warn("skipping an unreadable event; it proves nothing", "err", err)
			continue
		}
		if d.RemoteJobID != "" && d.Error == "" {
			taken[d.RemoteJobID] = true
		}
	}
	return taken
}

// expire frees the operation IDs of operations that ended longer ago than
// the retention period, and erases the secret arguments they still hold.
// The operations stay in the ledger.
func (w *Worker) expire(ctx context.Context) error {
	for {
		ops, err := w.store.OperationsEndedBefore(ctx, w.clock().Add(-w.cfg.Retention), 500)
		if err != nil {
			return err
		}
		now := w.clock()
		for _, op := range ops {
			if _, err := w.store.Transition(ctx, &ledger.TransitionParams{
				OperationRef: op.ID, ExpireKey: true, EraseSecrets: ledger.SecretsErasable(op, false, now, w.cfg.Retention),
			}); err != nil {
				return err
			}
		}
		if len(ops) < 500 {
			return nil
		}
	}
}
