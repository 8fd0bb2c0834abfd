package worker_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
)

// A job that keeps failing (here: the provider's lookup says completed and
// its get_job keeps answering an error) backs off with River's retries
// instead of being queued again at every sweep, and after a bounded number
// of failures the operation waits for a human.
func TestRepeatedJobFailuresGoToReview(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	p := startScripted(t, providerScript{lookupStatus: "succeeded", getJobFails: true})
	g := startGateway(t, p.url, fixtures.ConfigOptions{UpstreamTimeout: 300 * time.Millisecond, Lease: time.Second})
	const opID = "op-repeated-failures"
	op := g.settle(t, ctx, opID)
	if op.State != ledger.StateReview || op.ReviewReason != ledger.ReasonWorkerFailures {
		t.Fatalf("operation = %s (review reason %q, %s), want review for %q", op.State, op.ReviewReason, op.StatusMessage, ledger.ReasonWorkerFailures)
	}
	if n := len(events(t, ctx, g.Store, op, ledger.EventRecovered)); n != 0 {
		t.Errorf("recovered events = %d, want 0: a failed job stays queued for its retry", n)
	}
	if got := p.counter.count("run_suite"); got != 1 {
		t.Errorf("run_suite calls at the provider = %d, want 1", got)
	}
}

// The approval's retry policy holds even when the tool's is laxer: under
// no_automatic_resend a not_found lookup is never a reason to re-send.
func TestApprovalRetryPolicyIsTheStrictest(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	p := startScripted(t, providerScript{lookupStatus: "not_found", jobStatus: "succeeded", answerFrom: 2})
	g := startGateway(t, p.url, fixtures.ConfigOptions{
		Approval: true, UpstreamTimeout: 300 * time.Millisecond, NotFoundSafeAfter: new(time.Duration(0)), Lease: time.Second,
	})
	const opID = "op-approved-no-resend"
	if _, err := g.Store.ApprovalCreate(ctx, &ledger.Approval{
		Tenant: tenant, OperationID: opID, Tool: "hosted_test.run_suite", MaxTotalCost: money.MustParse("20.00", "USD"), MaxRemoteJobs: 1,
		RetryPolicy: "no_automatic_resend", ExpiresAt: time.Now().Add(time.Hour), CreatedBy: "test",
	}); err != nil {
		t.Fatal(err)
	}
	op := g.settle(t, ctx, opID)
	if op.State != ledger.StateReview || op.ReviewReason != ledger.ReasonNoAutomaticResend {
		t.Fatalf("operation = %s (review reason %q), want review for %q", op.State, op.ReviewReason, ledger.ReasonNoAutomaticResend)
	}
	if got := p.counter.count("run_suite"); got != 1 || op.SendCount != 1 {
		t.Errorf("run_suite calls = %d, sends = %d; want 1 and 1", got, op.SendCount)
	}
}

// Only "invalid request", "method not found" and "invalid params" mean the
// upstream refused the call before anything started.
func TestRefusedCallStartsNothing(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	p := startScripted(t, providerScript{lookupStatus: "not_found", runSuiteError: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "suite is unknown"}})
	g := startGateway(t, p.url, fixtures.ConfigOptions{Approval: true, Lease: time.Second})
	const opID = "op-refused"
	approve(t, ctx, g.Store, opID, "20.00", 1)
	op := g.settle(t, ctx, opID)
	if op.State != ledger.StateFailed {
		t.Fatalf("operation = %s (%s), want failed", op.State, op.StatusMessage)
	}
	if got := lookups(t, ctx, g.Store, op); len(got) != 0 {
		t.Errorf("lookups = %v, want none: the refusal is an answer", got)
	}
	if r := reservation(t, ctx, g.Store, op); r.Status != ledger.ReservationReleased {
		t.Errorf("reservation = %s, want released", r.Status)
	}
}

// flakyLeases fails one lease heartbeat with an error that is not a lost
// lease, as a busy database does.
type flakyLeases struct {
	ledger.Store
	fails atomic.Int32
}

func (f *flakyLeases) LeaseExtend(ctx context.Context, opRef int64, owner string, until time.Time) error {
	if f.fails.Add(-1) >= 0 {
		return errors.New("database is busy")
	}
	return f.Store.LeaseExtend(ctx, opRef, owner, until)
}

// A heartbeat that fails for a passing reason is tried again; the send in
// flight goes on and needs no lookup afterwards.
func TestHeartbeatErrorKeepsTheSend(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	sim := providersim.New(&providersim.Options{JobDuration: 2 * time.Second})
	t.Cleanup(func() { sim.Close() })
	counter := countCalls(sim.HTTPHandler())
	leases := &flakyLeases{}
	leases.fails.Store(1)
	// The first heartbeat, a third of the lease in, falls within the 2 s
	// send; a lease long enough that slow commits on a loaded machine
	// cannot let it lapse, which would send the operation to recovery.
	g := startGateway(t, serve(t, counter), fixtures.ConfigOptions{Tasks: "off", UpstreamTimeout: 10 * time.Second, Lease: 3 * time.Second},
		withStore(func(s ledger.Store) ledger.Store { leases.Store = s; return leases }))
	op := g.settle(t, ctx, "op-heartbeat")
	if op.State != ledger.StateCompleted {
		t.Fatalf("operation = %s (%s), want completed", op.State, op.StatusMessage)
	}
	if leases.fails.Load() > 0 {
		t.Fatal("no heartbeat failed; the test proves nothing")
	}
	if got := lookups(t, ctx, g.Store, op); len(got) != 0 || op.SendCount != 1 {
		t.Errorf("lookups = %v, sends = %d; want none and 1: the send was not aborted", got, op.SendCount)
	}
	if got := counter.count("run_suite"); got != 1 {
		t.Errorf("run_suite calls at the provider = %d, want 1", got)
	}
}

// flakyAttempts fails one read of an operation's attempts.
type flakyAttempts struct {
	ledger.Store
	fails atomic.Int32
}

func (f *flakyAttempts) AttemptList(ctx context.Context, opRef int64) ([]*ledger.Attempt, error) {
	if f.fails.Add(-1) >= 0 {
		return nil, errors.New("database is busy")
	}
	return f.Store.AttemptList(ctx, opRef)
}

// A failed read of the creating attempt is an error, not a remote job
// bound to no attempt; it happens before the send, which it delays.
func TestRemoteJobIsBoundToItsAttempt(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	sim := providersim.New(&providersim.Options{JobDuration: 200 * time.Millisecond})
	t.Cleanup(func() { sim.Close() })
	atts := &flakyAttempts{}
	atts.fails.Store(1)
	g := startGateway(t, serve(t, sim.HTTPHandler()), fixtures.ConfigOptions{Lease: time.Second},
		withStore(func(s ledger.Store) ledger.Store { atts.Store = s; return atts }))
	op := g.settle(t, ctx, "op-bound-to-attempt")
	if op.State != ledger.StateCompleted {
		t.Fatalf("operation = %s (%s), want completed", op.State, op.StatusMessage)
	}
	if atts.fails.Load() > 0 {
		t.Fatal("no read of the attempts failed; the test proves nothing")
	}
	attempts, err := g.Store.AttemptList(ctx, op.ID)
	if err != nil || len(attempts) != 1 {
		t.Fatalf("attempts = %+v, %v; want 1", attempts, err)
	}
	jobs, err := g.Store.RemoteJobList(ctx, op.ID)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("remote jobs = %d, %v; want 1", len(jobs), err)
	}
	if jobs[0].AttemptRef != attempts[0].ID {
		t.Errorf("remote job %s is bound to attempt %d, want %d", jobs[0].RemoteJobID, jobs[0].AttemptRef, attempts[0].ID)
	}
	if len(sim.Jobs()) != 1 {
		t.Errorf("provider jobs = %d, want 1", len(sim.Jobs()))
	}
}
