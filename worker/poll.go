package worker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/riverqueue/river"

	"github.com/taskgate/taskgate/internal/crashpoint"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/provider"
	"github.com/taskgate/taskgate/taskwire"
)

// errStillRunning is how one look at a remote job says "not yet".
var errStillRunning = errors.New("the remote job is still running")

// pollBudget is how long one poll job follows a remote job before it gives
// its worker slot back to the other operations being followed. Short waits
// happen inside the job: River releases a snoozed job only on its
// scheduler's next pass, seconds later.
const pollBudget = riverSchedulerLag

// poll follows the bound remote job until it ends, looking every
// UpstreamPoll for up to pollBudget, then snoozes.
func (w *Worker) poll(ctx context.Context, l *lease) error {
	deadline := w.clock().Add(pollBudget)
	for {
		err := w.pollOnce(ctx, l)
		if !errors.Is(err, errStillRunning) {
			return err
		}
		wait := min(w.cfg.Worker.UpstreamPoll, deadline.Sub(w.clock()))
		if wait <= 0 {
			return river.JobSnooze(w.cfg.Worker.UpstreamPoll)
		}
		l.turn.pause()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.stopping:
			// Hand the job back at once; the next start picks it up.
			return river.JobSnooze(0)
		case <-time.After(wait):
		}
		if err := l.turn.resume(ctx); err != nil {
			return err
		}
	}
}

// pollOnce looks at the bound remote job once.
func (w *Worker) pollOnce(ctx context.Context, l *lease) error {
	t, err := w.resolve(ctx, l)
	if t == nil {
		return err
	}
	op := l.op
	jobs, err := w.store.RemoteJobList(ctx, op.ID)
	if err != nil {
		return err
	}
	var bound *ledger.RemoteJob
	var intended []*ledger.RemoteJob
	for _, j := range jobs {
		if j.Intended {
			bound = j
			intended = append(intended, j)
		}
	}
	switch {
	case bound == nil:
		return w.review(ctx, l, ledger.ReasonUpstreamOutcomeUnknown, "the operation is running but no remote job is bound")
	case bound.Kind == ledger.JobKindUpstreamTask && bound.UpstreamTaskID != "":
		return w.pollTask(ctx, l, t, bound)
	case l.op.IntendedRemoteJobs > 1 && len(intended) > 1:
		return w.pollRoute(ctx, l, t, intended)
	}
	return w.pollJob(ctx, l, t, bound)
}

// pollRoute looks at every remote job of a call that fans out, and ends
// the operation once all of them have ended.
func (w *Worker) pollRoute(ctx context.Context, l *lease, t *target, jobs []*ledger.RemoteJob) error {
	op := l.op
	looks := make([]*provider.FetchResult, len(jobs))
	switch {
	case t.contract.CanFetch():
		for i, j := range jobs {
			f, err := t.contract.Fetch(ctx, t.up, j.RemoteJobID, op.ProviderKey(), l.args)
			if err != nil {
				w.logger(op).Warn("poll failed; trying again", "remote_job_id", j.RemoteJobID, "err", err)
				return errStillRunning
			}
			looks[i] = f
		}
	case t.contract.CanLookup():
		lr := t.contract.Lookup(ctx, t.up, op.ProviderKey(), l.args)
		answers := map[string]provider.Answer{}
		for _, ref := range lr.Jobs {
			answers[ref.ID] = ref.Answer
		}
		for i, j := range jobs {
			a, ok := answers[j.RemoteJobID]
			if !ok {
				w.logger(op).Warn("the lookup does not list a bound job yet; trying again", "remote_job_id", j.RemoteJobID, "detail", lr.Detail)
				return errStillRunning
			}
			looks[i] = &provider.FetchResult{Answer: a}
		}
	default:
		return w.review(ctx, l, ledger.ReasonUpstreamOutcomeUnknown, fmt.Sprintf(
			"%d remote jobs cannot be followed: the provider contract can neither fetch a job nor look the operation up; resolve it with --fail once the provider's own record shows how they ended", len(jobs)))
	}
	crashpoint.Reach(crashpoint.WhilePolling)
	for _, f := range looks {
		if !f.Answer.JobStatus().Terminal() {
			return errStillRunning
		}
	}
	return w.finishRoute(ctx, l, t, jobs, looks)
}

// finishRoute ends a call that fans out once every job has ended: completed
// when all completed, with a result that lists each job's (under the
// contract's remote_jobs_field); otherwise failed, or cancelled when every
// job was, naming the jobs that did not complete.
func (w *Worker) finishRoute(ctx context.Context, l *lease, t *target, jobs []*ledger.RemoteJob, looks []*provider.FetchResult) error {
	op := l.op
	var ups []*ledger.RemoteJobUpsert
	var items []any
	var text []mcp.Content
	var notDone []string
	cancelled := 0
	for i, j := range jobs {
		f := looks[i]
		u := &ledger.RemoteJobUpsert{Upstream: op.Upstream, Endpoint: t.up.Endpoint(), RemoteJobID: j.RemoteJobID, Status: f.Answer.JobStatus()}
		if f.Result != nil {
			raw, err := json.Marshal(f.Result)
			if err != nil {
				return err
			}
			u.Result = raw
			items = append(items, f.Result.StructuredContent)
			text = append(text, f.Result.Content...)
		}
		ups = append(ups, u)
		switch f.Answer {
		case provider.Completed:
		case provider.Cancelled:
			cancelled++
			notDone = append(notDone, j.RemoteJobID+" "+string(f.Answer))
		default:
			notDone = append(notDone, j.RemoteJobID+" "+string(f.Answer))
		}
	}
	if len(notDone) > 0 {
		msg := fmt.Sprintf("the provider reports %d of %d remote jobs not completed: %s", len(notDone), len(jobs), strings.Join(notDone, ", "))
		to := ledger.StateFailed
		if cancelled == len(jobs) {
			to = ledger.StateCancelled
		}
		return w.settle(ctx, l, &ledger.TransitionParams{
			From: []ledger.State{ledger.StateRunning}, To: to, Error: rpcError(-32603, msg), StatusMessage: &msg,
			RemoteJobs: ups,
			Events:     []ledger.EventParams{{Kind: ledger.EventFailed, Data: ledger.FailedData{Message: msg}}},
			Enqueue:    []river.InsertManyParams{job(ReconcileArgs{Operation: l.opRef}, 0)},
		})
	}
	res := &mcp.CallToolResult{Content: text}
	if items != nil {
		res.StructuredContent = map[string]any{cmp.Or(t.contract.Policy.Contract.RemoteJobsField, "remote_jobs"): items}
	}
	if len(text) == 0 {
		ids := make([]string, len(jobs))
		for i, j := range jobs {
			ids[i] = j.RemoteJobID
		}
		res.Content = []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("remote jobs %s completed at %s; the provider contract offers no way to fetch their results", strings.Join(ids, ", "), op.Upstream)}}
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return w.settle(ctx, l, &ledger.TransitionParams{
		From: []ledger.State{ledger.StateRunning}, To: ledger.StateCompleted, Result: raw, StatusMessage: new(""),
		RemoteJobs: ups,
		Creator:    &ledger.AttemptKnowledge{RemoteEffect: ledger.Yes},
		Events:     []ledger.EventParams{{Kind: ledger.EventResultStored, Data: ledger.ResultStoredData{IsError: new(false), RemoteJobID: jobs[0].RemoteJobID, Via: "fetch"}}},
		Enqueue:    []river.InsertManyParams{job(ReconcileArgs{Operation: l.opRef}, 0)},
	})
}

// pollJob looks at a provider job through the provider contract.
func (w *Worker) pollJob(ctx context.Context, l *lease, t *target, bound *ledger.RemoteJob) error {
	op := l.op
	if !t.contract.CanFetch() && !t.contract.CanLookup() {
		return w.review(ctx, l, ledger.ReasonUpstreamOutcomeUnknown, fmt.Sprintf(
			"job %s cannot be followed: the provider contract can neither fetch a job nor look the operation up; resolve it with --fail once the provider's own record shows how it ended", bound.RemoteJobID))
	}
	f, err := t.contract.Fetch(ctx, t.up, bound.RemoteJobID, op.ProviderKey(), l.args)
	if err != nil {
		w.logger(op).Warn("poll failed; trying again", "remote_job_id", bound.RemoteJobID, "err", err)
		return errStillRunning
	}
	crashpoint.Reach(crashpoint.WhilePolling)
	switch f.Answer {
	case provider.Completed:
		return w.fetchAndFinish(ctx, l, t, bound.RemoteJobID, nil)
	case provider.Failed, provider.Cancelled:
		return w.finishFailed(ctx, l, t, bound.RemoteJobID, f.Answer.JobStatus(), fmt.Sprintf("the provider reports job %s %s", bound.RemoteJobID, f.Answer), nil)
	default:
		return errStillRunning
	}
}

// pollTask follows an upstream MCP task, and carries the questions a
// 2026-07-28 task asks to the operation's client and its answers back.
func (w *Worker) pollTask(ctx context.Context, l *lease, t *target, bound *ledger.RemoteJob) error {
	if l.op.State == ledger.StateInputRequired {
		// The gateway records the client's answer beside this job.
		cur, err := w.store.OperationGet(ctx, &ledger.OperationGetParams{ID: l.opRef})
		if err != nil {
			return err
		}
		l.op = cur
	}
	legacy := t.up.OffersTasks() == taskwire.EraLegacy
	switch {
	case l.op.State == ledger.StateRunning && len(l.op.InputResponses) > 0 && !legacy:
		// A 2025-11-25 task takes its answer on tasks/result instead,
		// when it asks again (legacyTaskAsks).
		if err := w.deliverAnswers(ctx, l, t, bound); err != nil {
			return err
		}
	case l.op.State != ledger.StateRunning && l.op.State != ledger.StateInputRequired:
		// Cancelled, or ended otherwise, while its question waited: the
		// cancellation deals with the task.
		return nil
	}
	op := l.op
	task, err := t.up.GetTask(ctx, bound.UpstreamTaskID)
	if rpcErr := (*jsonrpc.Error)(nil); errors.As(err, &rpcErr) {
		// The upstream answered that it does not know the task (unknown,
		// or expired): asking it again changes nothing. The provider's
		// own record may still say how the job went.
		w.logger(op).Warn("the upstream no longer knows the task; following the job through the provider contract",
			"upstream_task_id", bound.UpstreamTaskID, "err", err)
		if !t.contract.CanFetch() && !t.contract.CanLookup() {
			return w.review(ctx, l, ledger.ReasonUpstreamOutcomeUnknown, fmt.Sprintf(
				"the upstream no longer knows task %s (%s) and the provider contract can neither fetch a job nor look the operation up; resolve it once the provider's own record shows how it ended",
				bound.UpstreamTaskID, rpcErr.Message))
		}
		return w.pollJob(ctx, l, t, bound)
	}
	if err != nil {
		w.logger(op).Warn("tasks/get failed; trying again", "upstream_task_id", bound.UpstreamTaskID, "err", err)
		return errStillRunning
	}
	switch {
	case task.Status == taskwire.StatusInputRequired && len(task.InputRequests) > 0:
		return w.taskAsks(ctx, l, task)
	case task.Status == taskwire.StatusInputRequired && legacy:
		return w.legacyTaskAsks(ctx, l, t, bound)
	}
	if !task.Status.IsTerminal() {
		crashpoint.Reach(crashpoint.WhilePolling)
		if legacy && op.State == ledger.StateRunning && len(op.InputResponses) > 0 {
			// Answers a 2025-11-25 task went on without: it asks no more.
			_, err := l.transition(ctx, &ledger.TransitionParams{From: []ledger.State{ledger.StateRunning}, Input: &ledger.InputUpdate{}})
			return lookAgain(err)
		}
		if op.State == ledger.StateInputRequired {
			// The task went on without the answer (it was answered
			// elsewhere, or stopped waiting): so does the operation.
			_, err := l.transition(ctx, &ledger.TransitionParams{
				From: []ledger.State{ledger.StateInputRequired}, To: ledger.StateRunning, Input: &ledger.InputUpdate{},
				StatusMessage: new(statusOr(task.StatusMessage, "the upstream's task no longer waits for the answer; running at "+op.Upstream)),
			})
			return lookAgain(err)
		}
		if msg := runningStatus(op.StatusMessage, task.StatusMessage); msg != op.StatusMessage {
			if _, err := l.transition(ctx, &ledger.TransitionParams{StatusMessage: &msg, StatusMessageWas: &op.StatusMessage}); err != nil {
				return err
			}
		}
		return errStillRunning
	}
	switch {
	case task.Status == taskwire.StatusCompleted,
		// 2025-11-25 reports a tool result with isError:true as a failed
		// task without an error: the result is the outcome.
		task.Status == taskwire.StatusFailed && task.Error == nil && t.up.OffersTasks() == taskwire.EraLegacy:
		res, err := t.up.TaskResult(ctx, task.ID, nil)
		if err != nil {
			var rpcErr *jsonrpc.Error
			if errors.As(err, &rpcErr) {
				return w.finishFailed(ctx, l, t, bound.RemoteJobID, ledger.JobFailed, rpcErr.Message, rpcError(rpcErr.Code, rpcErr.Message))
			}
			return fmt.Errorf("read the result of upstream task %s: %w", task.ID, err)
		}
		return w.finishTask(ctx, l, t, bound, res)
	case task.Status == taskwire.StatusFailed:
		var raw json.RawMessage
		msg := statusOr(task.StatusMessage, "the upstream task failed")
		if task.Error != nil {
			raw, _ = json.Marshal(task.Error)
			msg = task.Error.Message
		}
		return w.finishFailed(ctx, l, t, bound.RemoteJobID, ledger.JobFailed, msg, raw)
	default: // cancelled upstream
		return w.finishFailed(ctx, l, t, bound.RemoteJobID, ledger.JobCancelled, "the upstream cancelled the task", nil)
	}
}

// finishTask records a completed upstream task's result; the provider's job
// ID, when the result names one, replaces the task ID as the job's key.
func (w *Worker) finishTask(ctx context.Context, l *lease, t *target, bound *ledger.RemoteJob, res *mcp.CallToolResult) error {
	raw, err := json.Marshal(res)
	if err != nil {
		return err
	}
	jobID := bound.RemoteJobID
	ids := t.contract.RemoteJobIDs(res)
	if len(ids) > 0 {
		jobID = ids[0]
	}
	status, effect := ledger.JobCompleted, ledger.Yes
	if res.IsError {
		status, effect = ledger.JobFailed, ledger.Unknown
	}
	ups := []*ledger.RemoteJobUpsert{{
		Upstream: l.op.Upstream, RemoteJobID: jobID, RenameFrom: bound.RemoteJobID, Status: status, Result: raw,
	}}
	events := []ledger.EventParams{{Kind: ledger.EventResultStored, Data: ledger.ResultStoredData{IsError: new(res.IsError), RemoteJobID: jobID}}}
	if fansOut(l.op, ids) {
		// The task ran the whole call: its first job takes the task's
		// place, and the others are bound beside it.
		ups[0].Result = nil
		if res.IsError {
			ups[0].Status = ledger.JobUnknown
		}
		rest := make([]boundJob, 0, len(ids))
		for _, id := range ids[1:] {
			rest = append(rest, boundJob{id: id, status: ups[0].Status})
		}
		more, bound := bindJobs(l, t, append([]boundJob{{id: jobID}}, rest...), nil, "")
		ups = append(ups, more[1:]...)
		events = append(events, bound[1:]...)
	}
	return w.settle(ctx, l, &ledger.TransitionParams{
		From: []ledger.State{ledger.StateRunning, ledger.StateInputRequired}, To: ledger.StateCompleted, Result: raw, StatusMessage: new(""),
		Input:      withdrawn(l.op),
		RemoteJobs: ups,
		Creator:    &ledger.AttemptKnowledge{RemoteEffect: effect},
		Events:     events,
		Enqueue:    []river.InsertManyParams{job(ReconcileArgs{Operation: l.opRef}, 0)},
	})
}

// finishFailed ends the operation as failed after its remote job failed.
func (w *Worker) finishFailed(ctx context.Context, l *lease, t *target, jobID string, status ledger.JobStatus, msg string, rpcErr json.RawMessage) error {
	if rpcErr == nil {
		rpcErr = rpcError(-32603, msg)
	}
	to := ledger.StateFailed
	if status == ledger.JobCancelled {
		to = ledger.StateCancelled
	}
	return w.settle(ctx, l, &ledger.TransitionParams{
		From: []ledger.State{ledger.StateRunning, ledger.StateSending, ledger.StateInputRequired}, To: to, Error: rpcErr, StatusMessage: &msg,
		Input:      withdrawn(l.op),
		RemoteJobs: []*ledger.RemoteJobUpsert{{Upstream: l.op.Upstream, Endpoint: t.up.Endpoint(), RemoteJobID: jobID, Status: status}},
		Events:     []ledger.EventParams{{Kind: ledger.EventFailed, Data: ledger.FailedData{Message: msg, RemoteJobID: jobID}}},
		Enqueue:    []river.InsertManyParams{job(ReconcileArgs{Operation: l.opRef}, 0)},
	})
}

// taskAsks handles an upstream task that waits for input: its question is
// put to the operation's client, unless the client was asked it already
// (the task has not yet taken the answer given, or the answer is still to
// come). While the client does not answer, the task's retention is what
// ends the wait on this side.
func (w *Worker) taskAsks(ctx context.Context, l *lease, task *taskwire.Task) error {
	var q mcp.InputRequestMap
	raw, err := json.Marshal(task.InputRequests)
	if err == nil {
		err = json.Unmarshal(raw, &q)
	}
	if err != nil {
		return w.review(ctx, l, ledger.ReasonUpstreamInputRequired, fmt.Sprintf("upstream task %s asks for input the gateway cannot read: %v", task.ID, err))
	}
	e, asked, err := w.latestQuestion(ctx, l.op)
	if err != nil {
		return err
	}
	if e != nil && asked.UpstreamTask == task.ID && askedAlready(asked, q) {
		if l.op.State == ledger.StateInputRequired && l.op.TTL > 0 && !w.clock().Before(e.CreatedAt.Add(l.op.TTL)) {
			return lookAgain(w.unanswered(ctx, l, task.ID))
		}
		return errStillRunning
	}
	if l.op.State != ledger.StateRunning {
		// A question the client has not answered yet, replaced by another:
		// the client is asked the one the task waits on now.
		if _, err := l.transition(ctx, &ledger.TransitionParams{
			From: []ledger.State{ledger.StateInputRequired}, To: ledger.StateRunning, Input: &ledger.InputUpdate{},
		}); err != nil {
			return lookAgain(err)
		}
	}
	return lookAgain(w.ask(ctx, l, q, "", task.ID))
}

// legacyTaskAsks reads the result of a 2025-11-25 upstream task that
// waits in input_required, because such a task asks its question only on
// tasks/result: elicitForTask puts it to the operation's client, and the
// answer goes back on the same stream. tasks/result ends with the task,
// or with the upstream's timeout while the question waits; either way the
// task is looked at again, and a question asked again then is not asked
// anew.
func (w *Worker) legacyTaskAsks(ctx context.Context, l *lease, t *target, bound *ledger.RemoteJob) error {
	op := l.op
	if op.InputChannel == ledger.InputChannelNone {
		return w.review(ctx, l, ledger.ReasonUpstreamInputRequired, fmt.Sprintf(
			"upstream task %s waits for input, and the client that started this operation has no way to answer", bound.UpstreamTaskID))
	}
	e, asked, err := w.latestQuestion(ctx, op)
	if err != nil {
		return err
	}
	if op.State == ledger.StateInputRequired && asked.UpstreamTask == bound.UpstreamTaskID && op.TTL > 0 && !w.clock().Before(e.CreatedAt.Add(op.TTL)) {
		return lookAgain(w.unanswered(ctx, l, bound.UpstreamTaskID))
	}
	res, err := t.up.TaskResult(ctx, bound.UpstreamTaskID, w.elicitForTask(l, bound.UpstreamTaskID))
	if err != nil {
		// Also a failed or cancelled task's error: the next look at the
		// task says how it ended.
		w.logger(l.op).Info("tasks/result ended without the task's result; looking at the task again", "upstream_task_id", bound.UpstreamTaskID, "err", err)
		return errStillRunning
	}
	cur, err := w.store.OperationGet(ctx, &ledger.OperationGetParams{ID: l.opRef})
	if err != nil {
		return err
	}
	l.op = cur
	return w.finishTask(ctx, l, t, bound, res)
}

// lookAgain is what a move of an operation whose upstream task asks comes
// to: the task is looked at again, also when the client's answer changed
// the operation first (the next look reads it).
func lookAgain(err error) error {
	if err == nil || errors.Is(err, ledger.ErrStateChanged) {
		return errStillRunning
	}
	return err
}

// askedAlready reports whether the latest question asked holds every key
// of q, as the upstream keyed them: the question a task still shows until
// it takes the answer. A task never uses a key twice.
func askedAlready(asked ledger.InputRequestedData, q mcp.InputRequestMap) bool {
	var keys map[string]json.RawMessage
	if json.Unmarshal(asked.Requests, &keys) != nil {
		return false
	}
	upstreamKeys := map[string]bool{}
	for k := range keys {
		upstreamKeys[cmp.Or(asked.Renamed[k], k)] = true
	}
	for k := range q {
		if !upstreamKeys[k] {
			return false
		}
	}
	return true
}

// deliverAnswers gives the upstream task that asked the answers its
// client recorded, keyed as the task keyed its questions. An upstream that
// refuses them no longer waits on them; the next look at the task shows
// what it does instead.
func (w *Worker) deliverAnswers(ctx context.Context, l *lease, t *target, bound *ledger.RemoteJob) error {
	log := w.logger(l.op)
	_, asked, err := w.latestQuestion(ctx, l.op)
	if err != nil {
		return err
	}
	if asked.UpstreamTask != bound.UpstreamTaskID {
		// Answers of an earlier round, which went with its send.
		_, err := l.transition(ctx, &ledger.TransitionParams{From: []ledger.State{ledger.StateRunning}, Input: &ledger.InputUpdate{}})
		return err
	}
	var responses map[string]json.RawMessage
	if err := json.Unmarshal(l.op.InputResponses, &responses); err != nil {
		return fmt.Errorf("the recorded answers to the upstream task's question are unreadable: %w", err)
	}
	err = t.up.UpdateTask(ctx, bound.UpstreamTaskID, responses)
	var rpcErr *jsonrpc.Error
	switch {
	case errors.As(err, &rpcErr):
		log.Warn("the upstream refused the answers to its task's question", "upstream_task_id", bound.UpstreamTaskID, "err", err)
	case err != nil:
		log.Warn("tasks/update failed; trying again", "upstream_task_id", bound.UpstreamTaskID, "err", err)
		return errStillRunning
	default:
		log.Info("the answers went to the upstream task that asked", "upstream_task_id", bound.UpstreamTaskID, "keys", slices.Sorted(maps.Keys(responses)))
	}
	_, err = l.transition(ctx, &ledger.TransitionParams{From: []ledger.State{ledger.StateRunning}, Input: &ledger.InputUpdate{}})
	return err
}

// withdrawn clears the question of an operation that ends while an
// upstream task's question waits; nil keeps what is recorded.
func withdrawn(op *ledger.Operation) *ledger.InputUpdate {
	if op.State == ledger.StateInputRequired {
		return &ledger.InputUpdate{}
	}
	return nil
}
