package worker

import (
	"context"
	"errors"
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

// Sweep queues every operation whose lease has lapsed.
func (w *Worker) Sweep(ctx context.Context) error {
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
