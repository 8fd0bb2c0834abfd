package worker

import (
	"context"
	"sync"

	"github.com/riverqueue/river"

	"github.com/taskgate/taskgate/ledger"
)

// turn is a job's place among its tenant's jobs running at once
// (limits.jobs_per_tenant). A job holds it while it works and gives it
// back while it waits for a remote job or for a person, so that a
// tenant's waiting operations never keep its others from running.
type turn struct {
	w      *Worker
	tenant string
	gated  bool

	mu      sync.Mutex
	release func()
}

// takeTurn waits for a place for a job on operation opRef, before the job
// claims the operation: a tenant with a backlog takes at most its share of
// the worker, and so of the ledger's writes and the processors. Without
// limits, or when the operation cannot be read (the claim then says why),
// the turn holds nothing.
func (w *Worker) takeTurn(ctx context.Context, opRef int64) (*turn, error) {
	t := &turn{w: w}
	if w.limits == nil {
		return t, nil
	}
	op, err := w.store.OperationGet(ctx, &ledger.OperationGetParams{ID: opRef})
	if err != nil {
		return t, nil
	}
	t.tenant, t.gated = op.Tenant, true
	return t, t.resume(ctx)
}

// pause gives the place back while the job waits; it may be called from
// any goroutine, and more than once.
func (t *turn) pause() {
	t.mu.Lock()
	release := t.release
	t.release = nil
	t.mu.Unlock()
	if release != nil {
		release()
	}
}

// resume waits for a place again. A worker that begins to stop meanwhile
// hands the job back at once, to be run on the next start.
func (t *turn) resume(ctx context.Context) error {
	if !t.gated {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-t.w.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	release, err := t.w.limits.Job(ctx, t.tenant)
	if err != nil {
		select {
		case <-t.w.stopping:
			return river.JobSnooze(0)
		default:
			return err
		}
	}
	t.mu.Lock()
	t.release = release
	t.mu.Unlock()
	return nil
}
