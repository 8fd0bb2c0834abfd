package worker

import (
	"context"
	"fmt"
	"strings"

	"github.com/riverqueue/river"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/policy"
	"github.com/taskgate/taskgate/provider"
)

// recoverSend handles "send started" without a binding: look up first.
// cause is what made the outcome uncertain, when this worker saw it.
func (w *Worker) recoverSend(ctx context.Context, l *lease, cause error) error {
	t, err := w.resolve(ctx, l)
	if t == nil {
		return err
	}
	op := l.op
	why := ""
	if cause != nil {
		why = " (" + cause.Error() + ")"
	}
	if !t.contract.CanLookup() {
		return w.review(ctx, l, ledger.ReasonNoAutomaticResend,
			"the send may have reached the provider"+why+" and its contract offers no lookup; nothing is re-sent automatically")
	}
	retry, err := w.retryPolicy(ctx, op, t.contract)
	if err != nil {
		return err
	}
	since, err := w.sinceSend(ctx, op)
	if err != nil {
		return err
	}
	lctx, lspan := w.part(ctx, op, "taskgate.lookup")
	lr := t.contract.Lookup(lctx, t.up, op.ProviderKey(), l.args)
	lspan.End()
	if ctx.Err() != nil {
		// A lookup cut short by this worker stopping proves nothing.
		return ctx.Err()
	}
	d := provider.Decide(lr, op.IntendedRemoteJobs, retry, t.contract.Policy.Contract.Lookup.NotFoundSafeAfter, since)
	w.logger(op).Info("looked up after an uncertain send", "answer", lr.Answer, "job", lr.RemoteJobID, "action", d.Action, "retry_policy", retry, "detail", lr.Detail)
	lookupEvent := ledger.EventParams{Kind: ledger.EventLookup, Data: ledger.LookupData{
		Action: string(d.Action), Answer: string(lr.Answer), Detail: lr.Detail, RemoteJobID: new(lr.RemoteJobID),
		RetryPolicy: retry, SinceSendMS: new(since.Milliseconds()),
	}}

	switch d.Action {
	case provider.ActionAttach:
		jobs := []boundJob{{id: lr.RemoteJobID, status: lr.Answer.JobStatus()}}
		if fansOut(op, nil) && len(lr.Jobs) > 0 {
			jobs = jobs[:0]
			for _, j := range lr.Jobs {
				jobs = append(jobs, boundJob{id: j.ID, status: j.Answer.JobStatus()})
			}
		}
		ups, bound := bindJobs(l, t, jobs, nil, "lookup")
		return w.settle(ctx, l, &ledger.TransitionParams{
			From: []ledger.State{ledger.StateSending}, To: ledger.StateRunning, StatusMessage: new("attached to " + jobNames(jobs)),
			RemoteJobs: ups,
			Creator:    &ledger.AttemptKnowledge{RemoteAccepted: ledger.Yes},
			Events:     append([]ledger.EventParams{lookupEvent}, bound...),
			Enqueue:    []river.InsertManyParams{job(PollArgs{Operation: l.opRef}, 0)},
		})
	case provider.ActionFetch:
		return w.fetchAndFinish(ctx, l, t, lr.RemoteJobID, &lookupEvent)
	case provider.ActionRecordFailure:
		return w.settle(ctx, l, &ledger.TransitionParams{
			From: []ledger.State{ledger.StateSending}, To: ledger.StateFailed, StatusMessage: new("the provider reports job " + lr.RemoteJobID + " " + string(lr.Answer)),
			Error: rpcError(-32603, fmt.Sprintf("the provider reports job %s %s; it is not re-run automatically", lr.RemoteJobID, lr.Answer)),
			RemoteJobs: []*ledger.RemoteJobUpsert{{
				Upstream: op.Upstream, Endpoint: t.up.Endpoint(), RemoteJobID: lr.RemoteJobID, Kind: ledger.JobKindProviderJob,
				Status: lr.Answer.JobStatus(), Intended: new(true), AttemptRef: t.creator,
			}},
			Creator: &ledger.AttemptKnowledge{RemoteAccepted: ledger.Yes},
			Events: []ledger.EventParams{lookupEvent, boundVia(lr.RemoteJobID, "lookup"),
				{Kind: ledger.EventFailed, Data: ledger.FailedData{RemoteJobID: lr.RemoteJobID}}},
			Enqueue: []river.InsertManyParams{job(ReconcileArgs{Operation: l.opRef}, 0)},
		})
	case provider.ActionWait:
		if _, err := l.transition(ctx, &ledger.TransitionParams{Events: []ledger.EventParams{lookupEvent}}); err != nil {
			return err
		}
		return river.JobSnooze(d.RetryAfter)
	case provider.ActionResend:
		// Under another credential the provider may not see the job the
		// earlier send started: not_found proves nothing, and a resend
		// could start a second job.
		was, err := w.sentWith(ctx, op)
		if err != nil {
			return err
		}
		if now := t.up.Credential(); was != "" && was != now {
			if _, err := l.transition(ctx, &ledger.TransitionParams{Events: []ledger.EventParams{lookupEvent}}); err != nil {
				return err
			}
			return w.review(ctx, l, ledger.ReasonCredentialChanged, fmt.Sprintf(
				"the provider answered not_found, but the credential for tenant %s's requests to upstream %s changed since the operation was sent (%s then, %s now: tenant_headers or unlisted_tenants changed), "+
					"so the provider may not see the job the earlier send started; nothing is re-sent until a human resolves it (taskgate ops resolve --attach JOB, --resend or --fail)",
				op.Tenant, op.Upstream, credentialKind(was), credentialKind(now)))
		}
		if _, err := l.transition(ctx, &ledger.TransitionParams{
			From: []ledger.State{ledger.StateSending}, To: ledger.StateAccepted, Events: []ledger.EventParams{lookupEvent},
		}); err != nil {
			return err
		}
		return w.send(ctx, l)
	default:
		if _, err := l.transition(ctx, &ledger.TransitionParams{Events: []ledger.EventParams{lookupEvent}}); err != nil {
			return err
		}
		detail := lr.Detail
		if detail == "" {
			detail = fmt.Sprintf("the provider answered %s", lr.Answer)
			if lr.RemoteJobID == "" && lr.Answer != provider.NotFound {
				detail += " without naming a job"
			}
		}
		return w.review(ctx, l, d.Reason, "cannot tell whether the provider started the work ("+detail+"); nothing is re-sent until a human resolves it")
	}
}

// retryPolicy is the strictest of the retry policies that apply to op: the
// one recorded when it was accepted, its approval's, and the tool's now.
func (w *Worker) retryPolicy(ctx context.Context, op *ledger.Operation, c *provider.Contract) (ledger.RetryPolicy, error) {
	var approved ledger.RetryPolicy
	if op.ApprovalID != 0 {
		a, err := w.store.ApprovalGet(ctx, op.ApprovalID)
		if err != nil {
			return "", fmt.Errorf("read the retry policy of approval %d: %w", op.ApprovalID, err)
		}
		approved = a.RetryPolicy
	}
	return policy.StrictestRetry(op.RetryPolicy, approved, c.Policy.RetryPolicy), nil
}

func boundVia(jobID, via string) ledger.EventParams {
	return ledger.EventParams{Kind: ledger.EventRemoteJobBound, Data: ledger.RemoteJobData{Kind: ledger.JobKindProviderJob, RemoteJobID: jobID, Via: via}}
}

// credentialKind is what a credential fingerprint says of whose credential
// it is, for messages: "the tenant's own", "the gateway's shared" or "none".
func credentialKind(fp string) string {
	switch {
	case strings.HasPrefix(fp, "tenant:"):
		return "the tenant's own"
	case strings.HasPrefix(fp, "shared:"):
		return "the gateway's shared"
	}
	return "none"
}
