package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
)

func testLeases(t *testing.T, newStore Factory) {
	s := newStore(t)
	ctx := context.Background()
	p := params(t, call{"acme", "op-1", `{}`})
	p.QueueLease = time.Minute
	op := accept(t, s, p).Operation
	if op.LeaseOwner != ledger.LeaseQueued || op.LeaseUntil.IsZero() {
		t.Fatalf("accepted operation lease = %q until %v, want queued", op.LeaseOwner, op.LeaseUntil)
	}
	if got, err := s.OperationsToRecover(ctx, time.Now(), 10); err != nil || len(got) != 0 {
		t.Fatalf("recover while queued = %d, %v; want none", len(got), err)
	}
	claimed, err := s.LeaseClaim(ctx, op.ID, "w1", time.Now().Add(time.Minute))
	if err != nil || claimed.LeaseOwner != "w1" {
		t.Fatalf("claim a queued operation: %v, %v", claimed, err)
	}
	if _, err := s.LeaseClaim(ctx, op.ID, "w2", time.Now().Add(time.Minute)); !errors.Is(err, ledger.ErrLeaseHeld) {
		t.Fatalf("second worker claim: %v, want ErrLeaseHeld", err)
	}
	if err := s.LeaseExtend(ctx, op.ID, "w2", time.Now().Add(time.Minute)); !errors.Is(err, ledger.ErrLeaseHeld) {
		t.Fatalf("extend by non-owner: %v, want ErrLeaseHeld", err)
	}
	if err := s.LeaseExtend(ctx, op.ID, "w1", time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	// w1's lease lapsed: it is recoverable, and w2 may take it over.
	got, err := s.OperationsToRecover(ctx, time.Now(), 10)
	if err != nil || len(got) != 1 {
		t.Fatalf("recover after lapse = %d, %v; want 1", len(got), err)
	}
	if _, err := s.LeaseClaim(ctx, op.ID, "w2", time.Now().Add(time.Minute)); err != nil {
		t.Fatalf("take over a lapsed lease: %v", err)
	}
	if _, err := s.Transition(ctx, &ledger.TransitionParams{OperationRef: op.ID, Owner: "w1", To: ledger.StateSending}); !errors.Is(err, ledger.ErrLeaseHeld) {
		t.Fatalf("transition by a former owner: %v, want ErrLeaseHeld", err)
	}
	if _, err := s.Transition(ctx, &ledger.TransitionParams{OperationRef: op.ID, RequireLeaseLapsed: true, To: ledger.StateSending}); !errors.Is(err, ledger.ErrStateChanged) {
		t.Fatalf("recovery transition under a live lease: %v, want ErrStateChanged", err)
	}
}

func testTransitions(t *testing.T, newStore Factory) {
	s := newStore(t)
	ctx := context.Background()
	res := accept(t, s, params(t, call{"acme", "op-1", `{"suite":"x"}`}))
	op := res.Operation
	if _, err := s.LeaseClaim(ctx, op.ID, "w1", time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	sending, err := s.Transition(ctx, &ledger.TransitionParams{
		OperationRef: op.ID, Owner: "w1", From: []ledger.State{ledger.StateAccepted}, To: ledger.StateSending,
		IncrementSend: true, Events: []ledger.EventParams{{Kind: ledger.EventSendStarted}},
	})
	if err != nil || sending.State != ledger.StateSending || sending.SendCount != 1 {
		t.Fatalf("send started: %+v, %v", sending, err)
	}
	if _, err := s.Transition(ctx, &ledger.TransitionParams{OperationRef: op.ID, From: []ledger.State{ledger.StateAccepted}, To: ledger.StateSending}); !errors.Is(err, ledger.ErrStateChanged) {
		t.Fatalf("guarded transition from the wrong state: %v, want ErrStateChanged", err)
	}
	yes := true
	running, err := s.Transition(ctx, &ledger.TransitionParams{
		OperationRef: op.ID, Owner: "w1", From: []ledger.State{ledger.StateSending}, To: ledger.StateRunning,
		RemoteJobs: []*ledger.RemoteJobUpsert{{Upstream: "hosted_test", Endpoint: "http://127.0.0.1:1/mcp", RemoteJobID: "task-abc", UpstreamTaskID: "task-abc",
			Kind: "upstream_task", Status: ledger.JobRunning, Intended: &yes, AttemptRef: res.Attempt.ID}},
		Creator: &ledger.AttemptKnowledge{RemoteAccepted: ledger.Yes},
		Events:  []ledger.EventParams{{Kind: ledger.EventRemoteJobBound, Data: ledger.RemoteJobData{RemoteJobID: "task-abc"}}},
	})
	if err != nil || running.State != ledger.StateRunning {
		t.Fatalf("bind: %+v, %v", running, err)
	}
	// The provider's job ID becomes known: the job is re-keyed, not doubled.
	final := money.MustParse("17.84", "USD")
	done, err := s.Transition(ctx, &ledger.TransitionParams{
		OperationRef: op.ID, Owner: "w1", From: []ledger.State{ledger.StateRunning}, To: ledger.StateCompleted,
		Result: []byte(`{"content":[{"type":"text","text":"ok"}]}`), Lease: &ledger.Lease{},
		RemoteJobs: []*ledger.RemoteJobUpsert{{Upstream: "hosted_test", RemoteJobID: "hosted-suite-9912", RenameFrom: "task-abc", Status: ledger.JobCompleted}},
		Charges:    []*ledger.ChargeUpsert{{RemoteJobID: "hosted-suite-9912", ProviderChargeID: "ch-1", Amount: final, Status: ledger.ChargePending}},
		Creator:    &ledger.AttemptKnowledge{RemoteEffect: ledger.Yes},
	})
	if err != nil || done.State != ledger.StateCompleted || done.EndedAt.IsZero() || done.LeaseOwner != "" || string(done.Result) != `{"content":[{"type":"text","text":"ok"}]}` {
		t.Fatalf("complete: %+v, %v", done, err)
	}
	// A later observation never moves a terminal job back, and charges upsert by ID.
	if _, err := s.Transition(ctx, &ledger.TransitionParams{
		OperationRef: op.ID,
		RemoteJobs:   []*ledger.RemoteJobUpsert{{Upstream: "hosted_test", RemoteJobID: "hosted-suite-9912", Status: ledger.JobRunning}},
		Charges:      []*ledger.ChargeUpsert{{RemoteJobID: "hosted-suite-9912", ProviderChargeID: "ch-1", Amount: final, Status: ledger.ChargeFinal, Kind: "suite"}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transition(ctx, &ledger.TransitionParams{OperationRef: op.ID, To: ledger.StateFailed}); !errors.Is(err, ledger.ErrStateChanged) || !errors.Is(err, ledger.ErrIllegalTransition) {
		t.Fatalf("leaving a terminal state: %v, want ErrStateChanged and ErrIllegalTransition", err)
	}
	jobs, err := s.RemoteJobList(ctx, op.ID)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("remote jobs = %d, %v; want 1", len(jobs), err)
	}
	j := jobs[0]
	if j.RemoteJobID != "hosted-suite-9912" || j.UpstreamTaskID != "task-abc" || j.Status != ledger.JobCompleted || !j.Intended || j.AttemptRef != res.Attempt.ID || j.Endpoint != "http://127.0.0.1:1/mcp" {
		t.Fatalf("remote job = %+v", j)
	}
	charges, err := s.ChargeList(ctx, op.ID)
	if err != nil || len(charges) != 1 || charges[0].Status != ledger.ChargeFinal || charges[0].Amount.String() != "17.84" || charges[0].RemoteJobRef != j.ID || charges[0].Kind != "suite" {
		t.Fatalf("charges = %+v, %v", charges, err)
	}
	atts, err := s.AttemptList(ctx, op.ID)
	if err != nil || atts[0].RemoteAccepted != ledger.Yes || atts[0].RemoteEffect != ledger.Yes || atts[0].ChargeStatus != ledger.Unknown {
		t.Fatalf("creator knowledge = %+v, %v", atts[0], err)
	}
}

// testIllegalTransitions: a move the state table forbids is refused with
// ErrIllegalTransition, naming both states, and nothing else the
// transition carried is written; so is a move out of an ended state.
func testIllegalTransitions(t *testing.T, newStore Factory) {
	s := newStore(t)
	ctx := context.Background()
	res := accept(t, s, params(t, call{"acme", "op-1", `{"suite":"x"}`}))
	yes := true
	everything := func(to ledger.State) *ledger.TransitionParams {
		msg := "moved to " + string(to)
		return &ledger.TransitionParams{
			OperationRef: res.Operation.ID, To: to, StatusMessage: &msg, ReviewReason: &msg,
			Result: []byte(`{"content":[]}`), Error: []byte(`{"code":-32603,"message":"x"}`),
			IncrementSend: true, Lease: &ledger.Lease{Owner: "w9", Until: time.Now().Add(time.Hour)},
			CancelRequested: true, CostBreach: true, ExpireKey: true,
			RemoteJobs: []*ledger.RemoteJobUpsert{{Upstream: "hosted_test", RemoteJobID: "job-illegal", Kind: "provider_job", Status: ledger.JobCompleted, Intended: &yes}},
			Charges:    []*ledger.ChargeUpsert{{RemoteJobID: "job-illegal", ProviderChargeID: "ch-illegal", Amount: money.MustParse("1.00", "USD"), Status: ledger.ChargeFinal}},
			Creator:    &ledger.AttemptKnowledge{RemoteAccepted: ledger.Yes, RemoteEffect: ledger.Yes, ChargeStatus: ledger.Yes},
			Events:     []ledger.EventParams{{Kind: ledger.EventResultStored}},
			Enqueue:    []river.InsertManyParams{{Args: ProbeArgs{OperationRef: res.Operation.ID}}},
		}
	}
	refused := func(from, to ledger.State, ended bool) {
		t.Helper()
		before := ledgerOf(t, s, res.Operation.ID)
		if before.Operation.State != from {
			t.Fatalf("operation is %s, want %s", before.Operation.State, from)
		}
		_, err := s.Transition(ctx, everything(to))
		if !errors.Is(err, ledger.ErrIllegalTransition) || errors.Is(err, ledger.ErrStateChanged) != ended {
			t.Fatalf("%s to %s: %v, want ErrIllegalTransition (and ErrStateChanged: %v)", from, to, err, ended)
		}
		if msg := err.Error(); !strings.Contains(msg, string(from)) || !strings.Contains(msg, string(to)) {
			t.Errorf("%s to %s: error %q does not name both states", from, to, msg)
		}
		if after := ledgerOf(t, s, res.Operation.ID); !reflect.DeepEqual(after, before) {
			t.Errorf("%s to %s was refused but changed the ledger:\nbefore %+v\nafter  %+v", from, to, before, after)
		}
	}
	move := func(to ledger.State) {
		t.Helper()
		if _, err := s.Transition(ctx, &ledger.TransitionParams{OperationRef: res.Operation.ID, To: to}); err != nil {
			t.Fatalf("legal move to %s: %v", to, err)
		}
	}
	refused(ledger.StateAccepted, ledger.StateCompleted, false)
	refused(ledger.StateAccepted, ledger.StateRunning, false)
	refused(ledger.StateAccepted, "paused", false)
	move(ledger.StateSending)
	move(ledger.StateRunning)
	refused(ledger.StateRunning, ledger.StateSending, false)
	refused(ledger.StateRunning, ledger.StateAccepted, false)
	move(ledger.StateCompleted)
	refused(ledger.StateCompleted, ledger.StateReview, true)
	refused(ledger.StateCompleted, ledger.StateFailed, true)
}

// ledgerState is everything a transition may write about one operation.
type ledgerState struct {
	Operation  *ledger.Operation
	Attempts   []*ledger.Attempt
	RemoteJobs []*ledger.RemoteJob
	Charges    []*ledger.Charge
	Events     []*ledger.Event
	Jobs       int
}

func ledgerOf(t *testing.T, s ledger.Store, opRef int64) *ledgerState {
	t.Helper()
	ctx := context.Background()
	var (
		l   = &ledgerState{}
		err error
	)
	if l.Operation, err = s.OperationGet(ctx, &ledger.OperationGetParams{ID: opRef}); err != nil {
		t.Fatal(err)
	}
	if l.Attempts, err = s.AttemptList(ctx, opRef); err != nil {
		t.Fatal(err)
	}
	if l.RemoteJobs, err = s.RemoteJobList(ctx, opRef); err != nil {
		t.Fatal(err)
	}
	if l.Charges, err = s.ChargeList(ctx, opRef); err != nil {
		t.Fatal(err)
	}
	if l.Events, err = s.EventList(ctx, opRef); err != nil {
		t.Fatal(err)
	}
	l.Jobs = probeJobs(t, s)
	return l
}

func testKeyExpiry(t *testing.T, newStore Factory) {
	s := newStore(t)
	ctx := context.Background()
	first := accept(t, s, params(t, call{"acme", "op-1", `{"a":1}`})).Operation
	for _, to := range []ledger.State{ledger.StateSending, ledger.StateFailed} {
		if _, err := s.Transition(ctx, &ledger.TransitionParams{OperationRef: first.ID, To: to}); err != nil {
			t.Fatal(err)
		}
	}
	ended, err := s.OperationsEndedBefore(ctx, time.Now().Add(time.Minute), 10)
	if err != nil || len(ended) != 1 {
		t.Fatalf("ended = %d, %v", len(ended), err)
	}
	if res := accept(t, s, params(t, call{"acme", "op-1", `{"a":2}`})); res.Decision != ledger.DecisionConflict {
		t.Fatalf("within retention: %s, want conflict", res.Decision)
	}
	if _, err := s.Transition(ctx, &ledger.TransitionParams{OperationRef: first.ID, ExpireKey: true}); err != nil {
		t.Fatal(err)
	}
	again := accept(t, s, params(t, call{"acme", "op-1", `{"a":2}`}))
	if again.Decision != ledger.DecisionCreated || again.Operation.ID == first.ID {
		t.Fatalf("after retention: %s, want a new operation", again.Decision)
	}
	// The first operation stays in the ledger, reachable by its task ID.
	if _, err := s.OperationGet(ctx, &ledger.OperationGetParams{Tenant: "acme", TaskID: first.TaskID}); err != nil {
		t.Fatalf("expired operation by task ID: %v", err)
	}
}

// testBadRequestInAGroup: a request that fails (here: a request ID used
// twice) fails alone; the others committed with it succeed.
func testBadRequestInAGroup(t *testing.T, newStore Factory) {
	s := newStore(t)
	ctx := context.Background()
	const n = 24
	ps := make([]*ledger.AcceptParams, n)
	for i := range ps {
		ps[i] = params(t, call{"acme", fmt.Sprintf("op-%d", i), `{}`})
	}
	ps[n-1].RequestID = ps[0].RequestID
	_, errs := acceptAtOnce(ctx, s, ps)
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
		}
	}
	if failed != 1 {
		t.Fatalf("%d acceptances failed, want exactly the one reusing a request ID: %v", failed, errs)
	}
	if got := operationCount(t, s); got != n-1 {
		t.Fatalf("operations = %d, want %d", got, n-1)
	}
}

// testMixedGroup: acceptances that arrive together, and so are committed
// in groups, are decided exactly as one by one: fresh keys create, a
// repeated key creates once and attaches the rest, a key reused with other
// arguments conflicts, a stored operation attaches, and another tenant's
// equal key is its own operation.
func testMixedGroup(t *testing.T, newStore Factory) {
	s := newStore(t)
	ctx := context.Background()
	old := accept(t, s, params(t, call{"acme", "op-old", `{"suite":"a"}`}))
	type want struct {
		key      string
		decision ledger.Decision
	}
	var ps []*ledger.AcceptParams
	var wants []want
	add := func(c call, d ledger.Decision) {
		ps = append(ps, params(t, c))
		wants = append(wants, want{c.key, d})
	}
	for i := range 20 {
		add(call{"acme", fmt.Sprintf("op-%d", i), `{}`}, ledger.DecisionCreated)
	}
	add(call{"globex", "op-0", `{}`}, ledger.DecisionCreated)
	add(call{"acme", "op-old", `{"suite":"a"}`}, ledger.DecisionAttached)
	add(call{"acme", "op-old", `{"suite":"b"}`}, ledger.DecisionConflict)
	for range 3 {
		add(call{"acme", "op-dup", `{"suite":"d"}`}, "") // one created, the others attached
	}
	add(call{"acme", "op-clash", `{"suite":"x"}`}, "") // one created, the other a conflict
	add(call{"acme", "op-clash", `{"suite":"y"}`}, "")

	results, errs := acceptAtOnce(ctx, s, ps)
	decided := map[string][]ledger.Decision{}
	opOf := map[string]int64{}
	for i, res := range results {
		if errs[i] != nil {
			t.Fatalf("acceptance %d (%s): %v", i, wants[i].key, errs[i])
		}
		if wants[i].decision != "" && res.Decision != wants[i].decision {
			t.Errorf("acceptance %d (%s, tenant %s) decided %s (%s), want %s", i, wants[i].key, ps[i].Tenant, res.Decision, res.Reason, wants[i].decision)
		}
		decided[wants[i].key] = append(decided[wants[i].key], res.Decision)
		if res.Operation != nil && ps[i].Tenant == "acme" && res.Decision != ledger.DecisionConflict {
			if id, seen := opOf[wants[i].key]; seen && id != res.Operation.ID {
				t.Errorf("%s answered with operations %d and %d, want one", wants[i].key, id, res.Operation.ID)
			}
			opOf[wants[i].key] = res.Operation.ID
		}
	}
	if opOf["op-old"] != old.Operation.ID {
		t.Errorf("op-old attached to operation %d, want the stored %d", opOf["op-old"], old.Operation.ID)
	}
	count := func(ds []ledger.Decision, d ledger.Decision) int {
		n := 0
		for _, x := range ds {
			if x == d {
				n++
			}
		}
		return n
	}
	if ds := decided["op-dup"]; count(ds, ledger.DecisionCreated) != 1 || count(ds, ledger.DecisionAttached) != 2 {
		t.Errorf("op-dup decided %v, want one created and two attached", ds)
	}
	if ds := decided["op-clash"]; count(ds, ledger.DecisionCreated) != 1 || count(ds, ledger.DecisionConflict) != 1 {
		t.Errorf("op-clash decided %v, want one created and one conflict", ds)
	}
	// op-old, 20 fresh, globex's op-0, op-dup, op-clash.
	if got := operationCount(t, s); got != 24 {
		t.Errorf("operations = %d, want 24", got)
	}
	if got := probeJobs(t, s); got != 24 {
		t.Errorf("dispatch jobs = %d, want 24 (one per created operation)", got)
	}
}

// testPanicInAcceptance: a panic while deciding one acceptance (here: in
// the caller's Jobs function) fails that acceptance alone, rolls back what
// it wrote, and leaves the store accepting: no caller waits forever.
func testPanicInAcceptance(t *testing.T, newStore Factory) {
	s := newStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 8
	ps := make([]*ledger.AcceptParams, n)
	for i := range ps {
		ps[i] = params(t, call{"acme", fmt.Sprintf("op-%d", i), `{}`})
	}
	ps[3].Enqueue = func(*ledger.Operation) []river.InsertManyParams { panic("jobs of op-3 cannot be built") }
	_, errs := acceptAtOnce(ctx, s, ps)
	for i, err := range errs {
		if (err != nil) != (i == 3) {
			t.Errorf("acceptance of op-%d: error %v; want an error only for op-3", i, err)
		}
	}
	if _, err := s.OperationGet(ctx, &ledger.OperationGetParams{Tenant: "acme", OperationID: "op-3"}); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("operation op-3 after its acceptance panicked: %v; want ErrNotFound", err)
	}
	if res := accept(t, s, params(t, call{"acme", "op-after", `{}`})); res.Decision != ledger.DecisionCreated {
		t.Errorf("acceptance after the panic = %s, want created", res.Decision)
	}
	if got := probeJobs(t, s); got != n {
		t.Errorf("dispatch jobs = %d, want %d (one per created operation)", got, n)
	}
}

// testCloseDuringAcceptance: acceptances in flight when the store closes
// are each answered, committed or with ErrClosed, and later ones are
// refused with ErrClosed. None waits forever.
func testCloseDuringAcceptance(t *testing.T, newStore Factory) {
	s := newStore(t)
	const workers = 32
	var (
		wg       sync.WaitGroup
		accepted atomic.Int64
		errs     = make(chan error, workers)
	)
	for w := range workers {
		wg.Go(func() {
			for i := 0; ; i++ {
				_, err := s.Accept(context.Background(), params(t, call{"acme", fmt.Sprintf("op-%d-%d", w, i), `{}`}))
				if err != nil {
					errs <- err
					return
				}
				accepted.Add(1)
			}
		})
	}
	// Every worker accepts once before the store closes; a worker whose
	// first acceptance failed has returned, and so does the test.
	for accepted.Load() < workers {
		select {
		case err := <-errs:
			t.Fatalf("acceptance before Close: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("acceptances still unanswered 30s after Close")
	}
	close(errs)
	for err := range errs {
		if !errors.Is(err, ledger.ErrClosed) {
			t.Errorf("acceptance during Close: %v, want ErrClosed", err)
		}
	}
	if _, err := s.Accept(context.Background(), params(t, call{"acme", "op-after", `{}`})); !errors.Is(err, ledger.ErrClosed) {
		t.Errorf("acceptance after Close: %v, want ErrClosed", err)
	}
}

// testCancelOnce: of concurrent transitions that each record the first
// request to cancel an operation, exactly one applies; the others fail
// with ErrCancelRequested and write nothing.
func testCancelOnce(t *testing.T, newStore Factory) {
	s := newStore(t)
	ctx := context.Background()
	op := accept(t, s, params(t, call{"acme", "op-1", `{"suite":"x"}`})).Operation
	const n = 8
	var (
		wg      sync.WaitGroup
		applied atomic.Int32
	)
	for range n {
		wg.Go(func() {
			_, err := s.Transition(ctx, &ledger.TransitionParams{
				OperationRef: op.ID, CancelRequested: true, CancelOnce: true,
				Events: []ledger.EventParams{{Kind: ledger.EventCancellationRequested, Data: ledger.CancellationRequestedData{State: op.State}}},
			})
			switch {
			case err == nil:
				applied.Add(1)
			case !errors.Is(err, ledger.ErrCancelRequested):
				t.Errorf("a second request to cancel: %v, want ErrCancelRequested", err)
			}
		})
	}
	wg.Wait()
	if got := applied.Load(); got != 1 {
		t.Fatalf("%d of %d concurrent first cancellations applied, want 1", got, n)
	}
	l := ledgerOf(t, s, op.ID)
	requested := 0
	for _, e := range l.Events {
		if e.Kind == ledger.EventCancellationRequested {
			requested++
		}
	}
	if requested != 1 || l.Operation.CancelRequestedAt.IsZero() {
		t.Errorf("%d cancellation_requested events, cancel requested at %v; want one, and the time", requested, l.Operation.CancelRequestedAt)
	}
}

// testStatusMessageWas: a status message guarded by the one it read is
// written while that one stands; once another change wrote a new one, that
// one stays and the rest of the guarded change still applies.
func testStatusMessageWas(t *testing.T, newStore Factory) {
	s := newStore(t)
	ctx := context.Background()
	op := accept(t, s, params(t, call{"acme", "op-1", `{"suite":"x"}`})).Operation
	read := op.StatusMessage
	if _, err := s.Transition(ctx, &ledger.TransitionParams{OperationRef: op.ID, StatusMessage: new("the client's cancel was kept")}); err != nil {
		t.Fatal(err)
	}
	out, err := s.Transition(ctx, &ledger.TransitionParams{OperationRef: op.ID, To: ledger.StateSending,
		StatusMessage: new("provider: 40% done"), StatusMessageWas: &read})
	if err != nil {
		t.Fatalf("a change with a stale status message guard: %v", err)
	}
	if out.State != ledger.StateSending || out.StatusMessage != "the client's cancel was kept" {
		t.Fatalf("after the change: %s, %q; want sending, with the status message written meanwhile", out.State, out.StatusMessage)
	}
	was := "the client's cancel was kept"
	out, err = s.Transition(ctx, &ledger.TransitionParams{OperationRef: op.ID, StatusMessage: new("the client's cancel was kept; provider: 40% done"), StatusMessageWas: &was})
	if err != nil || out.StatusMessage != "the client's cancel was kept; provider: 40% done" {
		t.Fatalf("a change guarded by the current status message: %+v, %v", out, err)
	}
}
