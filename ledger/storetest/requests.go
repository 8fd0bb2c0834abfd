package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
)

// waits makes p a call without an approval that, lacking one, waits as an
// approval request (mode RequestWait) or names one in its denial
// (RequestRecord).
func waits(p *ledger.AcceptParams, mode ledger.RequestMode) *ledger.AcceptParams {
	p = needsApproval(p, "12.00")
	p.Approval.Request, p.Approval.RequestTTL, p.Approval.RequestedBy = mode, time.Hour, "api_key:1"
	p.SecretArguments = []string{"token"}
	return p
}

// terms are an approver's terms that cover a 12.00 call.
func terms() *ledger.Approval {
	return &ledger.Approval{MaxTotalCost: money.MustParse("20.00", "USD"), MaxRemoteJobs: 1, ExpiresAt: time.Now().Add(time.Hour)}
}

func decide(s ledger.Store, id int64, outcome ledger.ApprovalRequestStatus, now time.Time) (*ledger.ApprovalRequestDecided, error) {
	d := &ledger.ApprovalRequestDecision{Tenant: "acme", ID: id, Outcome: outcome, By: "api_key:9", Note: "checked", Now: now,
		QueueLease: time.Minute, Enqueue: func(op *ledger.Operation) []river.InsertManyParams {
			return []river.InsertManyParams{{Args: ProbeArgs{OperationRef: op.ID}}}
		}}
	if outcome == ledger.RequestApproved {
		d.Approval = terms()
	}
	if outcome == ledger.RequestExpired {
		d.Tenant, d.By, d.Note = "", "", ""
	}
	return s.ApprovalRequestDecide(context.Background(), d)
}

func eventKinds(t *testing.T, s ledger.Store, opRef int64) []ledger.EventKind {
	t.Helper()
	evs, err := s.EventList(context.Background(), opRef)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []ledger.EventKind
	for _, e := range evs {
		kinds = append(kinds, e.Kind)
	}
	return kinds
}

func testApprovalRequests(t *testing.T, newStore Factory) {
	ctx := context.Background()
	args := `{"suite":"s","token":"hunter2"}`

	t.Run("a call without an approval waits, holding nothing", func(t *testing.T) {
		s := newStore(t)
		res := accept(t, s, waits(params(t, call{"acme", "op-wait", args}), ledger.RequestWait))
		if res.Decision != ledger.DecisionCreated || res.Operation.State != ledger.StateAwaitingApproval || res.Request == nil {
			t.Fatalf("Accept = %s %q, operation %+v, request %+v; want created awaiting_approval with a request", res.Decision, res.Reason, res.Operation, res.Request)
		}
		req := res.Request
		if req.Status != ledger.RequestPending || req.OperationRef != res.Operation.ID || req.Tool != "hosted_test.run_suite" ||
			req.Estimate.String() != "12.00" || req.RemoteJobs != 1 || req.RequestedBy != "api_key:1" || req.Fingerprint != res.Operation.Fingerprint {
			t.Fatalf("request = %+v", req)
		}
		if strings.Contains(string(req.Arguments), "hunter2") || !strings.Contains(string(req.Arguments), ledger.Redacted) {
			t.Fatalf("request arguments = %s; want the secret redacted", req.Arguments)
		}
		if n := probeJobs(t, s); n != 0 {
			t.Fatalf("queued jobs = %d, want none before an approval", n)
		}
		op, err := s.OperationGet(ctx, &ledger.OperationGetParams{ID: res.Operation.ID})
		if err != nil {
			t.Fatal(err)
		}
		if op.LeaseOwner != "" || !op.LeaseUntil.IsZero() || op.ApprovalID != 0 || !strings.Contains(op.StatusMessage, "approval request") {
			t.Fatalf("waiting operation = %+v; want no lease, no approval and a status naming the request", op)
		}
		if rec, err := s.OperationsToRecover(ctx, time.Now().Add(time.Hour), 10); err != nil || len(rec) != 0 {
			t.Fatalf("OperationsToRecover = %d, %v; a waiting operation is not recovered", len(rec), err)
		}
		if got := eventKinds(t, s, op.ID); len(got) != 1 || got[0] != ledger.EventApprovalRequested {
			t.Fatalf("events = %v, want approval_requested", got)
		}
		pending, err := s.ApprovalRequestList(ctx, &ledger.ApprovalRequestListParams{Tenant: "acme", Statuses: []ledger.ApprovalRequestStatus{ledger.RequestPending}})
		if err != nil || len(pending) != 1 || pending[0].ID != req.ID {
			t.Fatalf("pending requests = %+v, %v", pending, err)
		}
		if _, err := s.ApprovalRequestGet(ctx, "other", req.ID); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("another tenant's ApprovalRequestGet: %v, want ErrNotFound", err)
		}

		// Retries attach; the same arguments under a new operation ID are
		// a retry of the waiting operation.
		again := accept(t, s, waits(params(t, call{"acme", "op-wait", args}), ledger.RequestWait))
		if again.Decision != ledger.DecisionAttached || again.Operation.ID != op.ID {
			t.Fatalf("retry = %s %q; want attached", again.Decision, again.Reason)
		}
		other := accept(t, s, waits(params(t, call{"acme", "op-new", args}), ledger.RequestWait))
		if other.Decision != ledger.DecisionDenied || other.Reason != ledger.ReasonRetryUsesNewOperation || !strings.Contains(other.Message, "op-wait") {
			t.Fatalf("new operation ID = %s %q %q; want %s naming op-wait", other.Decision, other.Reason, other.Message, ledger.ReasonRetryUsesNewOperation)
		}

		// Approving reserves the route against the new approval and queues
		// the operation, in one transaction.
		d, err := decide(s, req.ID, ledger.RequestApproved, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Operation.State != ledger.StateAccepted || d.Operation.ApprovalID != d.Approval.ID || d.Operation.LeaseOwner != ledger.LeaseQueued ||
			d.Approval.CreatedBy != "api_key:9" || d.Request.Status != ledger.RequestApproved || d.Request.DecidedBy != "api_key:9" || d.Request.ApprovalRef != d.Approval.ID {
			t.Fatalf("approved: %+v / %+v / %+v", d.Operation, d.Approval, d.Request)
		}
		rs, err := s.ReservationList(ctx, d.Approval.ID)
		if err != nil || len(rs) != 1 || rs[0].OperationRef != op.ID || rs[0].Amount.String() != "12.00" || rs[0].Status != ledger.ReservationHeld {
			t.Fatalf("reservations = %+v, %v", rs, err)
		}
		if n := probeJobs(t, s); n != 1 {
			t.Fatalf("queued jobs = %d, want the one dispatch", n)
		}
		evs, err := s.EventList(ctx, op.ID)
		if err != nil {
			t.Fatal(err)
		}
		last := evs[len(evs)-1]
		data, err := ledger.DecodeEventData[ledger.ApprovalRequestData](last)
		if err != nil || last.Kind != ledger.EventApprovalRequestApproved || data.Approver != "api_key:9" || data.ApprovalID != d.Approval.ID || data.RequestID != req.ID {
			t.Fatalf("last event = %s %s, %v", last.Kind, last.Data, err)
		}
		if _, err := decide(s, req.ID, ledger.RequestDeclined, time.Time{}); !errors.Is(err, ledger.ErrRequestDecided) {
			t.Fatalf("decline after approve: %v, want ErrRequestDecided", err)
		}
	})

	t.Run("a decline or an expiry ends the operation failed", func(t *testing.T) {
		for _, tt := range []struct {
			outcome ledger.ApprovalRequestStatus
			at      time.Time
			reason  string
			kind    ledger.EventKind
		}{
			{ledger.RequestDeclined, time.Time{}, ledger.ReasonApprovalDeclined, ledger.EventApprovalRequestDeclined},
			{ledger.RequestExpired, time.Now().Add(2 * time.Hour), ledger.ReasonApprovalRequestExpired, ledger.EventApprovalRequestExpired},
		} {
			s := newStore(t)
			res := accept(t, s, waits(params(t, call{"acme", "op-" + string(tt.outcome), args}), ledger.RequestWait))
			if tt.outcome == ledger.RequestExpired {
				if _, err := decide(s, res.Request.ID, ledger.RequestExpired, time.Time{}); !errors.Is(err, ledger.ErrRequestDecided) {
					t.Fatalf("expiring a request before its time: %v, want ErrRequestDecided", err)
				}
				due, err := s.ApprovalRequestList(ctx, &ledger.ApprovalRequestListParams{Statuses: []ledger.ApprovalRequestStatus{ledger.RequestPending}, ExpiredBy: tt.at})
				if err != nil || len(due) != 1 {
					t.Fatalf("requests due to expire = %d, %v", len(due), err)
				}
			}
			d, err := decide(s, res.Request.ID, tt.outcome, tt.at)
			if err != nil {
				t.Fatal(err)
			}
			var e struct {
				Data struct {
					Reason string `json:"reason"`
				} `json:"data"`
			}
			if err := json.Unmarshal(d.Operation.Error, &e); err != nil || d.Operation.State != ledger.StateFailed || e.Data.Reason != tt.reason {
				t.Fatalf("%s: operation %s, error %s; want failed with %s", tt.outcome, d.Operation.State, d.Operation.Error, tt.reason)
			}
			if kinds := eventKinds(t, s, d.Operation.ID); kinds[len(kinds)-1] != tt.kind {
				t.Fatalf("%s: events %v, want %s last", tt.outcome, kinds, tt.kind)
			}
			if n := probeJobs(t, s); n != 0 {
				t.Fatalf("%s: queued jobs = %d, want none", tt.outcome, n)
			}
			if _, err := decide(s, res.Request.ID, ledger.RequestApproved, time.Time{}); !errors.Is(err, ledger.ErrRequestDecided) {
				t.Fatalf("%s then approve: %v, want ErrRequestDecided", tt.outcome, err)
			}
		}
	})

	t.Run("terms short of the route change nothing", func(t *testing.T) {
		s := newStore(t)
		res := accept(t, s, waits(params(t, call{"acme", "op-short", args}), ledger.RequestWait))
		short := terms()
		short.MaxTotalCost = money.MustParse("5.00", "USD")
		_, err := s.ApprovalRequestDecide(ctx, &ledger.ApprovalRequestDecision{Tenant: "acme", ID: res.Request.ID, Outcome: ledger.RequestApproved, Approval: short, By: "api_key:9"})
		if !errors.Is(err, ledger.ErrApprovalShort) {
			t.Fatalf("approve for 5.00 of a 12.00 call: %v, want ErrApprovalShort", err)
		}
		if list, err := s.ApprovalList(ctx, &ledger.ApprovalListParams{Tenant: "acme", IncludeRevoked: true}); err != nil || len(list) != 0 {
			t.Fatalf("approvals = %d, %v; want none", len(list), err)
		}
		if got, err := s.ApprovalRequestGet(ctx, "acme", res.Request.ID); err != nil || got.Status != ledger.RequestPending {
			t.Fatalf("request = %+v, %v; want still pending", got, err)
		}
	})

	t.Run("cancelling the waiting operation cancels its request", func(t *testing.T) {
		s := newStore(t)
		res := accept(t, s, waits(params(t, call{"acme", "op-cancel", args}), ledger.RequestWait))
		if _, err := s.Transition(ctx, &ledger.TransitionParams{OperationRef: res.Operation.ID, To: ledger.StateCancelled, CancelRequested: true}); err != nil {
			t.Fatal(err)
		}
		if got, err := s.ApprovalRequestGet(ctx, "acme", res.Request.ID); err != nil || got.Status != ledger.RequestCancelled {
			t.Fatalf("request = %+v, %v; want cancelled", got, err)
		}
		if _, err := decide(s, res.Request.ID, ledger.RequestApproved, time.Time{}); !errors.Is(err, ledger.ErrRequestDecided) {
			t.Fatalf("approve after cancel: %v, want ErrRequestDecided", err)
		}
	})

	t.Run("a client without tasks is denied, naming one request", func(t *testing.T) {
		s := newStore(t)
		first := accept(t, s, waits(params(t, call{"acme", "op-record", args}), ledger.RequestRecord))
		if first.Decision != ledger.DecisionDenied || first.Reason != ledger.ReasonApprovalRequired || first.Request == nil || first.Request.OperationRef != 0 {
			t.Fatalf("Accept = %s %q, request %+v; want denied approval_required naming a request", first.Decision, first.Reason, first.Request)
		}
		again := accept(t, s, waits(params(t, call{"acme", "op-record", args}), ledger.RequestRecord))
		if again.Request == nil || again.Request.ID != first.Request.ID {
			t.Fatalf("retry names request %+v, want %d", again.Request, first.Request.ID)
		}
		if n := operationCount(t, s); n != 0 {
			t.Fatalf("operations = %d, want none", n)
		}
		d, err := decide(s, first.Request.ID, ledger.RequestApproved, time.Time{})
		if err != nil || d.Operation != nil || d.Approval == nil {
			t.Fatalf("approve = %+v, %v", d, err)
		}
		ran := accept(t, s, waits(params(t, call{"acme", "op-record", args}), ledger.RequestRecord))
		if ran.Decision != ledger.DecisionCreated || ran.Operation.State != ledger.StateAccepted || ran.Operation.ApprovalID != d.Approval.ID {
			t.Fatalf("retry after approval = %s %q; want created under approval %d", ran.Decision, ran.Reason, d.Approval.ID)
		}
		// The operation's receipt finds the request by its approval, and
		// the two refusals, which point at no operation, by its call.
		byApproval, err := s.ApprovalRequestList(ctx, &ledger.ApprovalRequestListParams{Tenant: "acme", ApprovalRef: d.Approval.ID})
		if err != nil || len(byApproval) != 1 || byApproval[0].ID != first.Request.ID || byApproval[0].Note != "checked" || byApproval[0].DecidedBy != "api_key:9" {
			t.Fatalf("requests of approval %d = %+v, %v; want request %d, decided by api_key:9 with its note", d.Approval.ID, byApproval, err, first.Request.ID)
		}
		if other, err := s.ApprovalRequestList(ctx, &ledger.ApprovalRequestListParams{Tenant: "globex", ApprovalRef: d.Approval.ID}); err != nil || len(other) != 0 {
			t.Fatalf("another tenant's requests of approval %d = %+v, %v; want none", d.Approval.ID, other, err)
		}
		refused, err := s.AttemptListRefused(ctx, &ledger.RefusedAttemptListParams{Tenant: "acme", OperationID: "op-record",
			Fingerprint: first.Request.Fingerprint, From: first.Request.CreatedAt, To: ran.Operation.CreatedAt})
		if err != nil || len(refused) != 2 || refused[0].ID != first.Attempt.ID || refused[1].ID != again.Attempt.ID {
			t.Fatalf("refused attempts = %+v, %v; want the two refusals before the operation", refused, err)
		}
		if late, err := s.AttemptListRefused(ctx, &ledger.RefusedAttemptListParams{Tenant: "acme", OperationID: "op-record",
			Fingerprint: first.Request.Fingerprint, From: ran.Operation.CreatedAt.Add(time.Microsecond), To: ran.Operation.CreatedAt.Add(time.Hour)}); err != nil || len(late) != 0 {
			t.Fatalf("refused attempts after the operation = %+v, %v; want none", late, err)
		}
	})

	t.Run("an expired approval asks for a new one", func(t *testing.T) {
		s := newStore(t)
		if _, err := s.ApprovalCreate(ctx, approval("acme", "op-old", "20.00", 1, time.Now().Add(-time.Minute))); err != nil {
			t.Fatal(err)
		}
		res := accept(t, s, waits(params(t, call{"acme", "op-old", args}), ledger.RequestWait))
		if res.Decision != ledger.DecisionCreated || res.Operation.State != ledger.StateAwaitingApproval || res.Request == nil {
			t.Fatalf("Accept = %s %q; want created awaiting_approval", res.Decision, res.Reason)
		}
		d, err := decide(s, res.Request.ID, ledger.RequestApproved, time.Time{})
		if err != nil || d.Operation.State != ledger.StateAccepted {
			t.Fatalf("approve = %+v, %v", d, err)
		}
		rs, err := s.ReservationList(ctx, d.Approval.ID)
		if err != nil || len(rs) != 1 {
			t.Fatalf("reservations against the new approval = %d, %v; want 1", len(rs), err)
		}
	})

	t.Run("racing decisions record exactly one", func(t *testing.T) {
		s := newStore(t)
		res := accept(t, s, waits(params(t, call{"acme", "op-race", args}), ledger.RequestWait))
		outcomes := []ledger.ApprovalRequestStatus{ledger.RequestApproved, ledger.RequestDeclined, ledger.RequestApproved, ledger.RequestExpired, ledger.RequestDeclined, ledger.RequestApproved}
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			won   []ledger.ApprovalRequestStatus
			start = make(chan struct{})
		)
		for _, o := range outcomes {
			wg.Go(func() {
				<-start
				at := time.Time{}
				if o == ledger.RequestExpired {
					// An approve and a decline decide before the expiry,
					// the expiry after it: all of them may apply.
					at = time.Now().Add(2 * time.Hour)
				}
				_, err := decide(s, res.Request.ID, o, at)
				switch {
				case err == nil:
					mu.Lock()
					won = append(won, o)
					mu.Unlock()
				case !errors.Is(err, ledger.ErrRequestDecided):
					t.Errorf("%s: %v", o, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if len(won) != 1 {
			t.Fatalf("decisions recorded = %v, want exactly one", won)
		}
		got, err := s.ApprovalRequestGet(ctx, "acme", res.Request.ID)
		if err != nil || got.Status != won[0] {
			t.Fatalf("request = %+v, %v; want %s", got, err, won[0])
		}
		list, err := s.ApprovalList(ctx, &ledger.ApprovalListParams{Tenant: "acme", IncludeRevoked: true})
		if err != nil {
			t.Fatal(err)
		}
		wantApprovals, wantJobs := 0, 0
		if won[0] == ledger.RequestApproved {
			wantApprovals, wantJobs = 1, 1
		}
		if len(list) != wantApprovals || probeJobs(t, s) != wantJobs {
			t.Fatalf("after %s: %d approvals, %d jobs; want %d and %d", won[0], len(list), probeJobs(t, s), wantApprovals, wantJobs)
		}
	})
}
