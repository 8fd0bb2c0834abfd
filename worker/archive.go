package worker

import (
	"context"
	"errors"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/taskgate/taskgate/archive"
	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/signingkeys"
)

// ArchiveArgs archives ended, reconciled operations as retention.archive
// says (see package archive).
type ArchiveArgs struct{}

// Kind implements river.JobArgs.
func (ArchiveArgs) Kind() string { return "taskgate_archive" }

// InsertOpts implements river.JobArgsWithInsertOpts: at most one archive
// run is queued or running across replicas, since two runs into one
// directory would race for the same run number.
func (ArchiveArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{UniqueOpts: river.UniqueOpts{ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRetryable,
		rivertype.JobStateRunning, rivertype.JobStateScheduled,
	}}}
}

type archiveWorker struct {
	river.WorkerDefaults[ArchiveArgs]
	w *Worker
}

// Timeout implements river.Worker: a run stops well before the job queue
// would take it for stuck and start another; what it did not reach waits
// for the next run.
func (a *archiveWorker) Timeout(*river.Job[ArchiveArgs]) time.Duration {
	return reconcileTimeout(a.w.cfg)
}

func (a *archiveWorker) Work(ctx context.Context, _ *river.Job[ArchiveArgs]) error {
	return a.w.archive(ctx)
}

// archiveJobs is the periodic archive run, when retention.archive is set.
func archiveJobs(cfg *config.Config) []*river.PeriodicJob {
	a := cfg.Retention.Archive
	if a == nil {
		return nil
	}
	return []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(a.Every),
		func() (river.JobArgs, *river.InsertOpts) { return ArchiveArgs{}, nil },
		&river.PeriodicJobOpts{RunOnStart: true})}
}

// archive runs taskgate archive as retention.archive says, run after run
// while each archives as many operations as one run may hold.
func (w *Worker) archive(ctx context.Context) error {
	a := w.cfg.Retention.Archive
	if a == nil {
		return nil
	}
	signer := signingkeys.NewSigner(w.store, w.secrets)
	for {
		now := w.clock()
		res, err := archive.Run(ctx, w.store, signer, &archive.Options{
			Out: a.Out, EndedBefore: now.Add(-a.After), Retention: w.cfg.Retention.OperationIDs,
			Batch: a.Batch, MaxOperations: a.MaxOperations, Now: now,
		})
		if err != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				w.log.Warn("an archive run ran out of time; the next run goes on", "timeout", reconcileTimeout(w.cfg), "err", err)
				return nil
			}
			w.log.Error("archive run failed; operations stay in the ledger until a run succeeds", "out", a.Out, "err", err)
			return err
		}
		if res.Operations > 0 {
			w.log.Info("archived ended operations", "run", res.Run, "out", a.Out, "operations", res.Operations,
				"files", len(res.Files), "deleted", res.Pruned, "kept", res.Kept, "skipped", res.Skipped)
		}
		if res.Operations < a.MaxOperations {
			return nil
		}
	}
}
