package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/riverqueue/river"

	"github.com/taskgate/taskgate/ledger"
)

// Resolution is a human's decision about an operation. Exactly one field
// besides Actor and Note is set.
type Resolution struct {
	// Attach binds the provider job with this ID and follows it.
	Attach string
	// Resend sends the call again: the human vouches that the earlier send
	// started nothing.
	Resend bool
	// Fail ends the operation as failed.
	Fail bool
	// AcceptDuplicate accepts a duplicate job as legitimate.
	AcceptDuplicate string
	// CancelDuplicate asks the provider to cancel a duplicate job.
	CancelDuplicate string
	Actor           string
	Note            string
}

// errNoResolution is a Resolution that names no action.
var errNoResolution = errors.New("resolve: choose --attach JOB, --resend, --fail, --accept-duplicate JOB or --cancel-duplicate JOB")

// Resolve records a human's resolution and queues the work it implies. It
// needs only the ledger: the jobs run in the gateway.
func Resolve(ctx context.Context, s ledger.Store, op *ledger.Operation, r Resolution) (*ledger.Operation, error) {
	if r.action() == "" {
		return nil, errNoResolution
	}
	if err := checkResolvable(ctx, s, op, r); err != nil {
		return nil, err
	}
	event := ledger.EventParams{Kind: ledger.EventResolved, Data: ledger.ResolvedData{
		Action: r.action(), Actor: r.Actor, Note: r.Note, RemoteJobID: r.Attach + r.AcceptDuplicate + r.CancelDuplicate,
	}}
	p := &ledger.TransitionParams{OperationRef: op.ID, Events: []ledger.EventParams{event}}
	review := []ledger.State{ledger.StateReview}
	switch {
	case r.Attach != "":
		p.From, p.To = review, ledger.StateRunning
		p.StatusMessage = new("attached to " + r.Attach + " by " + r.Actor)
		p.RemoteJobs = []*ledger.RemoteJobUpsert{{Upstream: op.Upstream, RemoteJobID: r.Attach, Kind: ledger.JobKindProviderJob, Status: ledger.JobRunning, Intended: new(true)}}
		p.Creator = &ledger.AttemptKnowledge{RemoteAccepted: ledger.Yes}
		p.Lease = &ledger.Lease{Owner: ledger.LeaseQueued}
		p.Enqueue = []river.InsertManyParams{{Args: PollArgs{Operation: op.ID}}}
	case r.Resend:
		p.From, p.To = review, ledger.StateAccepted
		p.StatusMessage = new("re-sent by " + r.Actor)
		p.Lease = &ledger.Lease{Owner: ledger.LeaseQueued}
		p.Enqueue = []river.InsertManyParams{{Args: DispatchArgs{Operation: op.ID}}}
	case r.Fail:
		msg := "failed by " + r.Actor
		if r.Note != "" {
			msg += ": " + r.Note
		}
		p.From, p.To = review, ledger.StateFailed
		p.StatusMessage, p.Error = &msg, rpcError(-32603, msg)
		p.Lease = &ledger.Lease{}
		p.Enqueue = []river.InsertManyParams{{Args: ReconcileArgs{Operation: op.ID}}}
	case r.AcceptDuplicate != "":
		p.RemoteJobs = []*ledger.RemoteJobUpsert{{Upstream: op.Upstream, RemoteJobID: r.AcceptDuplicate, DuplicateResolved: "accepted"}}
	case r.CancelDuplicate != "":
		p.Enqueue = []river.InsertManyParams{{Args: CancelArgs{Operation: op.ID, Job: r.CancelDuplicate}}}
	default:
		return nil, errNoResolution
	}
	out, err := s.Transition(ctx, p)
	switch {
	case errors.Is(err, ledger.ErrStateChanged):
		return nil, fmt.Errorf("operation %s left review while the resolution was being recorded; nothing was changed (see taskgate ops show %s): %w", op.OperationID, op.OperationID, err)
	case err != nil:
		return nil, fmt.Errorf("record the resolution of operation %s: %w", op.OperationID, err)
	}
	return out, nil
}

// checkResolvable refuses a resolution that does not fit the operation,
// before anything is written: attach, resend and fail need an operation in
// review, and a duplicate decision needs a duplicate remote job of this
// operation (naming an unknown job would record a new one).
func checkResolvable(ctx context.Context, s ledger.Store, op *ledger.Operation, r Resolution) error {
	if r.AcceptDuplicate == "" && r.CancelDuplicate == "" {
		if op.State != ledger.StateReview {
			return fmt.Errorf("operation %s is %s, not waiting for review; only an operation in review can be attached, re-sent or failed (see taskgate ops show %s)",
				op.OperationID, op.State, op.OperationID)
		}
		return nil
	}
	id := r.AcceptDuplicate + r.CancelDuplicate
	jobs, err := s.RemoteJobList(ctx, op.ID)
	if err != nil {
		return fmt.Errorf("load remote jobs of operation %s: %w", op.OperationID, err)
	}
	i := slices.IndexFunc(jobs, func(j *ledger.RemoteJob) bool { return j.RemoteJobID == id })
	switch {
	case i < 0:
		return fmt.Errorf("operation %s has no remote job %s (see taskgate ops show %s)", op.OperationID, id, op.OperationID)
	case !jobs[i].Duplicate:
		return fmt.Errorf("remote job %s of operation %s is not a duplicate; only duplicates are accepted or cancelled here", id, op.OperationID)
	}
	return nil
}

func (r Resolution) action() string {
	switch {
	case r.Attach != "":
		return "attach"
	case r.Resend:
		return "resend"
	case r.Fail:
		return "fail"
	case r.AcceptDuplicate != "":
		return "accept_duplicate"
	case r.CancelDuplicate != "":
		return "cancel_duplicate"
	}
	return ""
}
