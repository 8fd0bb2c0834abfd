package worker

import (
	"context"
	"fmt"

	"github.com/riverqueue/river"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/provider"
)

// cancelRemote asks the provider to cancel the operation's jobs (or one
// job) and records, separately, that cancellation was sent and whether the
// effect was reversed. A job that already finished is asked too: the
// provider's answer is the evidence that its effect stands.
func (w *Worker) cancelRemote(ctx context.Context, opRef int64, only string) error {
	op, err := w.store.OperationGet(ctx, &ledger.OperationGetParams{ID: opRef})
	if err != nil {
		return err
	}
	c := w.catalog.Contract(op.Upstream, op.Tool)
	up, ok := w.upstreams.Upstream(op.Upstream)
	if c == nil || !ok {
		return river.JobCancel(fmt.Errorf("operation %s: its upstream tool is no longer configured", op.OperationID))
	}
	jobs, err := w.store.RemoteJobList(ctx, op.ID)
	if err != nil {
		return err
	}
	targets := map[string]*ledger.RemoteJob{}
	for _, j := range jobs {
		if only == "" || j.RemoteID == only {
			targets[j.RemoteID] = j
		}
	}
	// A send that started without a binding may still have created a job.
	if only == "" && len(jobs) == 0 && op.SendCount > 0 && c.CanLookup() {
		if lr := c.Lookup(ctx, up, op.ProviderKey(), op.Arguments); lr.JobID != "" {
			targets[lr.JobID] = &ledger.RemoteJob{RemoteID: lr.JobID, Kind: KindProviderJob, Status: lr.Answer.JobStatus()}
		}
	}
	p := &ledger.TransitionParams{OperationRef: op.ID, Jobs: []river.InsertManyParams{job(ReconcileArgs{Operation: op.ID}, 0)}}
	for id, j := range targets {
		if j.Status == ledger.JobCancelled {
			continue
		}
		u := &ledger.RemoteJobUpsert{Upstream: op.Upstream, Endpoint: up.Endpoint(), RemoteID: id, Kind: j.Kind, CancelRequested: true}
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
			p.Events = append(p.Events, ledger.EventParams{Kind: ledger.EventCancelSent, Data: map[string]string{"remote_job_id": id, "error": err.Error()}})
			w.logger(op).Warn("cancel failed", "remote_job_id", id, "err", err)
			p.RemoteJobs = append(p.RemoteJobs, u)
			continue
		}
		u.EffectReversed = res.EffectReversed
		p.Events = append(p.Events, ledger.EventParams{Kind: ledger.EventCancelSent, Data: map[string]string{"remote_job_id": id, "detail": res.Detail}})
		switch res.EffectReversed {
		case ledger.Yes:
			p.Events = append(p.Events, ledger.EventParams{Kind: ledger.EventEffectReversed, Data: map[string]string{"remote_job_id": id}})
			if j.Duplicate {
				u.DuplicateResolved = "cancelled"
			}
		case ledger.No:
			p.Events = append(p.Events, ledger.EventParams{Kind: ledger.EventEffectNotReversed, Data: map[string]string{
				"remote_job_id": id, "detail": res.Detail, "job_status": string(j.Status),
			}})
		}
		p.RemoteJobs = append(p.RemoteJobs, u)
	}
	_, err = w.store.Transition(ctx, p)
	return err
}

// expire frees the operation IDs of operations that ended longer ago than
// the retention period. The operations stay in the ledger.
func (w *Worker) expire(ctx context.Context) error {
	for {
		ops, err := w.store.OperationsEndedBefore(ctx, w.clock().Add(-w.cfg.Retention), 500)
		if err != nil {
			return err
		}
		for _, op := range ops {
			if _, err := w.store.Transition(ctx, &ledger.TransitionParams{OperationRef: op.ID, ExpireKey: true}); err != nil {
				return err
			}
		}
		if len(ops) < 500 {
			return nil
		}
	}
}
