package providersim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/taskwire"
)

// taskHost lets taskwire serve run_suite as an MCP task, in the 2026-07-28
// tasks extension and in 2025-11-25 experimental tasks, to clients that ask
// for one. A task is the remote job itself: the task ID is the job ID, a
// repeated call with a known idempotency key returns the key's task, and
// tasks/get reports the job's progress. Calls that cannot receive a task, and
// every other tool, pass through to the plain tool handlers.
//
// The simulated provider has one tenant: every caller sees every task, as
// every caller can read every job with get_job.
type taskHost struct {
	s *Sim
}

var _ taskwire.Host = taskHost{}

// TaskSupport implements [taskwire.Host]: run_suite may run as a task.
// run_matrix may not: one call is several jobs, and a task is one job.
func (h taskHost) TaskSupport(tool string) taskwire.TaskSupport {
	if tool == ToolRunSuite {
		return taskwire.TaskOptional
	}
	return taskwire.TaskForbidden
}

// CallTool implements [taskwire.Host].
func (h taskHost) CallTool(ctx context.Context, call *taskwire.ToolCall) (*taskwire.Outcome, error) {
	if call.Name != ToolRunSuite || call.Caller.Era == taskwire.EraNone {
		return &taskwire.Outcome{Pass: true}, nil
	}
	var args RunSuiteArgs
	dec := json.NewDecoder(bytes.NewReader(call.Arguments))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&args); err != nil || strings.TrimSpace(args.Suite) == "" {
		// The plain handler checks the arguments against the input schema
		// and says what is wrong; no job is started.
		return &taskwire.Outcome{Pass: true}, nil
	}
	key, source := findKey(args.IdempotencyKey, call.Caller.Meta, call.Caller.Header)
	job, err := h.s.accept(ctx, startRequest{
		Suite:     args.Suite,
		Commit:    args.Commit,
		Token:     args.Token,
		Key:       key,
		KeySource: source,
		Protocol:  call.Caller.ProtocolVersion,
	})
	if err != nil {
		return nil, err
	}
	t, err := h.task(job.ID)
	if err != nil {
		return nil, err
	}
	return &taskwire.Outcome{Task: t}, nil
}

// GetTask implements [taskwire.Host].
func (h taskHost) GetTask(_ context.Context, _ *taskwire.Caller, taskID string) (*taskwire.Task, error) {
	return h.task(taskID)
}

// CancelTask implements [taskwire.Host] with cancel_job's rules.
func (h taskHost) CancelTask(_ context.Context, _ *taskwire.Caller, taskID string) (*taskwire.Task, error) {
	if _, err := h.s.engine.cancel(taskID); err != nil {
		return nil, fmt.Errorf("%w: %s", taskwire.ErrTaskNotFound, taskID)
	}
	return h.task(taskID)
}

// UpdateTask implements [taskwire.Host]. A job never asks for input, so
// there is nothing to deliver responses to.
func (h taskHost) UpdateTask(_ context.Context, _ *taskwire.Caller, taskID string, _ map[string]json.RawMessage) error {
	_, err := h.task(taskID)
	return err
}

// ListTasks implements [taskwire.Host]: every job, oldest first, in one page.
func (h taskHost) ListTasks(_ context.Context, _ *taskwire.Caller, cursor string) ([]*taskwire.Task, string, error) {
	if cursor != "" {
		return nil, "", fmt.Errorf("cursor %q: %w", cursor, taskwire.ErrInvalidCursor)
	}
	r := h.s.engine.record()
	charges := make(map[string][]Charge, len(r.Jobs))
	for _, c := range r.Charges {
		charges[c.JobID] = append(charges[c.JobID], c)
	}
	tasks := make([]*taskwire.Task, 0, len(r.Jobs))
	for _, job := range r.Jobs {
		t, err := h.taskFor(job, charges[job.ID])
		if err != nil {
			return nil, "", err
		}
		tasks = append(tasks, t)
	}
	return tasks, "", nil
}

// WaitTask implements [taskwire.Host].
func (h taskHost) WaitTask(ctx context.Context, _ *taskwire.Caller, taskID string) (*taskwire.Task, error) {
	job, charges, err := h.s.engine.wait(ctx, taskID)
	if err != nil {
		if _, _, ok := h.s.engine.job(taskID); !ok {
			return nil, fmt.Errorf("%w: %s", taskwire.ErrTaskNotFound, taskID)
		}
		return nil, err
	}
	return h.taskFor(job, charges)
}

// task returns the task of a job.
func (h taskHost) task(jobID string) (*taskwire.Task, error) {
	job, charges, ok := h.s.engine.job(jobID)
	if !ok {
		return nil, fmt.Errorf("%w: %s", taskwire.ErrTaskNotFound, jobID)
	}
	return h.taskFor(job, charges)
}

// taskFor renders a job as a task: queued and running are working, with the
// job's progress as the status message; a job that ended with a result is
// completed and carries run_suite's result (isError when the suite failed);
// a cancelled job is cancelled.
func (h taskHost) taskFor(job Job, charges []Charge) (*taskwire.Task, error) {
	t := &taskwire.Task{
		ID:            job.ID,
		CreatedAt:     job.CreatedAt,
		LastUpdatedAt: job.UpdatedAt,
		PollInterval:  h.s.pollInterval,
		StatusMessage: summary(job, charges),
	}
	switch job.Status {
	case StatusQueued, StatusRunning:
		t.Status = taskwire.StatusWorking
	case StatusCancelled:
		t.Status = taskwire.StatusCancelled
	default:
		t.Status = taskwire.StatusCompleted
		res, out := resultFor(job, charges)
		res.StructuredContent = out
		raw, err := json.Marshal(res)
		if err != nil {
			return nil, fmt.Errorf("encoding the result of %s: %w", job.ID, err)
		}
		t.Result = raw
	}
	return t, nil
}

// pollIntervalFor suggests how often to poll a task: a quarter of a job's
// duration, between 5ms and 1s.
func pollIntervalFor(jobDuration time.Duration) time.Duration {
	return min(max(jobDuration/4, 5*time.Millisecond), time.Second)
}

// installTasks makes server offer run_suite as a task through taskwire.
func (s *Sim) installTasks(server *mcp.Server) error {
	if err := taskwire.Install(server, taskHost{s: s}, &taskwire.Options{Logger: s.logger}); err != nil {
		return fmt.Errorf("providersim: offering run_suite as a task: %w", err)
	}
	return nil
}
