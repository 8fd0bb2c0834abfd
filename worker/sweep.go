package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/taskgate/taskgate/ledger"
)

// sweepLoop finds unfinished operations whose lease lapsed — their worker
// died, or their job was lost — and queues them again. Recovery needs no
// leader: the ledger's lease guard lets exactly one replica queue each.
func (w *Worker) sweepLoop(ctx context.Context) {
	t := time.NewTicker(w.cfg.Worker.Sweep)
	defer t.Stop()
	for {
		if err := w.Sweep(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn("lease sweep failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sweep queues every operation whose lease has lapsed, and expires the
// approval requests that nobody decided in time.
func (w *Worker) Sweep(ctx context.Context) error {
	if err := w.recoverLapsed(ctx); err != nil {
		return err
	}
	return w.expireRequests(ctx)
}

// recoverLapsed queues every operation whose lease has lapsed.
func (w *Worker) recoverLapsed(ctx context.Context) error {
	ops, err := w.store.OperationsToRecover(ctx, w.clock(), 100)
	if err != nil {
		return err
	}
	for _, op := range ops {
		var next river.JobArgs = DispatchArgs{Operation: op.ID}
		if op.State == ledger.StateRunning {
			next = PollArgs{Operation: op.ID}
		}
		_, err := w.store.Transition(ctx, &ledger.TransitionParams{
			OperationRef: op.ID, RequireLeaseLapsed: true,
			// Only an operation still in the state it was listed in: one
			// that ended or moved on meanwhile needs no job.
			From:    []ledger.State{op.State},
			Lease:   &ledger.Lease{Owner: ledger.LeaseQueued, Until: w.clock().Add(w.cfg.Worker.Lease)},
			Events:  []ledger.EventParams{{Kind: ledger.EventRecovered, Data: ledger.RecoveredData{LapsedOwner: op.LeaseOwner, State: op.State}}},
			Enqueue: []river.InsertManyParams{{Args: next}},
		})
		switch {
		case err == nil:
			w.logger(op).Info("recovered an operation whose lease lapsed", "state", op.State, "lapsed_owner", op.LeaseOwner)
		case errors.Is(err, ledger.ErrStateChanged):
			// Another replica, or the operation's own worker, got there first.
		default:
			return err
		}
	}
	return nil
}

// dueForExpiry reports whether request q, as read, has waited out its
// lifetime at now without a decision.
func dueForExpiry(q *ledger.ApprovalRequest, now time.Time) bool {
	return q.Status == ledger.RequestPending && !now.Before(q.ExpiresAt)
}

// expireRequests records the expiry of every pending approval request past
// its lifetime: its waiting operation fails approval_request_expired with
// nothing started. An approver's decision that lands first wins; the
// ledger's compare-and-set keeps exactly one.
func (w *Worker) expireRequests(ctx context.Context) error {
	now := w.clock()
	due, err := w.store.ApprovalRequestList(ctx, &ledger.ApprovalRequestListParams{
		Statuses: []ledger.ApprovalRequestStatus{ledger.RequestPending}, ExpiredBy: now, Limit: 100,
	})
	if err != nil {
		return fmt.Errorf("list the approval requests due to expire: %w", err)
	}
	for _, q := range due {
		if !dueForExpiry(q, now) {
			continue
		}
		_, err := w.store.ApprovalRequestDecide(ctx, &ledger.ApprovalRequestDecision{ID: q.ID, Outcome: ledger.RequestExpired, Now: now})
		switch {
		case err == nil:
			w.log.Info("an approval request expired undecided", "tenant", q.Tenant, "operation_id", q.OperationID,
				"approval_request", q.ID, "expires_at", q.ExpiresAt)
		case errors.Is(err, ledger.ErrRequestDecided):
			// An approver, or another replica, decided it first.
		default:
			return fmt.Errorf("expire approval request %d: %w", q.ID, err)
		}
	}
	return nil
}
