package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
)

// testSpendProperty drives random sequences of attempts (new operation IDs,
// retries, retries under new IDs), estimates and charges against one
// approval each, and checks at every dispatch that what the approval had
// committed plus the new estimate stays within its ceiling, and that the
// remote jobs started never exceed its limit.
func testSpendProperty(t *testing.T, newStore Factory) {
	s := newStore(t)
	ctx := context.Background()
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		tenant := fmt.Sprintf("tenant-%d", n)
		ceiling := rapid.Int64Range(1, 30).Draw(rt, "ceiling") * money.MicrosPerUnit
		maxJobs := rapid.IntRange(1, 4).Draw(rt, "max_jobs")
		a, err := s.ApprovalCreate(ctx, &ledger.Approval{
			Tenant: tenant, OperationID: "op-0", Tool: "hosted_test.run_suite",
			MaxTotalCost: money.FromMicros(ceiling, "USD"), MaxRemoteJobs: maxJobs,
			RetryPolicy: "lookup_then_attach", ExpiresAt: time.Now().Add(time.Hour),
		})
		if err != nil {
			rt.Fatal(err)
		}
		var created []*ledger.Operation
		steps := rapid.IntRange(2, 16).Draw(rt, "steps")
		for i := range steps {
			switch rapid.IntRange(0, 2).Draw(rt, "action") {
			case 0, 1: // an attempt: a new ID or an existing one, always the same arguments
				key := fmt.Sprintf("op-%d", rapid.IntRange(0, 3).Draw(rt, "key"))
				estimate := money.FromMicros(rapid.Int64Range(0, 2*ceiling/money.MicrosPerUnit).Draw(rt, "estimate")*money.MicrosPerUnit/2, "USD")
				before := committed(rt, s, a.ID)
				res, err := s.Accept(ctx, needsApproval(params(rt, call{tenant, key, `{"s":1}`}), estimate.String()))
				if err != nil {
					rt.Fatal(err)
				}
				if res.Decision != ledger.DecisionCreated {
					continue
				}
				created = append(created, res.Operation)
				if before.Spend.Micros+estimate.Micros > ceiling {
					rt.Fatalf("step %d: dispatched %s with %s already committed; ceiling %s", i, estimate, before.Spend, money.FromMicros(ceiling, "USD"))
				}
				if before.RemoteJobs+1 > maxJobs {
					rt.Fatalf("step %d: dispatched a remote job with %d already started; limit %d", i, before.RemoteJobs, maxJobs)
				}
			case 2: // charges arrive for a created operation, or it definitely never started
				if len(created) == 0 {
					continue
				}
				op := created[rapid.IntRange(0, len(created)-1).Draw(rt, "op")]
				u := &ledger.ReservationUpdate{Status: ledger.ReservationReleased}
				if rapid.Bool().Draw(rt, "started") {
					u = &ledger.ReservationUpdate{Status: ledger.ReservationSettled, Settled: money.FromMicros(rapid.Int64Range(0, 2*ceiling/money.MicrosPerUnit).Draw(rt, "charge")*money.MicrosPerUnit/2, "USD")}
				}
				if _, err := s.Transition(ctx, &ledger.TransitionParams{OperationRef: op.ID, Reservation: u}); err != nil {
					rt.Fatal(err)
				}
			}
		}
	})
}

// committed sums, independently of package policy, what an approval's
// reservations hold: estimates while held, actual charges once settled.
func committed(rt *rapid.T, s ledger.Store, approvalRef int64) usage {
	rs, err := s.ReservationList(context.Background(), approvalRef)
	if err != nil {
		rt.Fatal(err)
	}
	var u usage
	for _, r := range rs {
		switch r.Status {
		case ledger.ReservationHeld:
			u.Spend.Micros += r.Amount.Micros
			u.RemoteJobs++
		case ledger.ReservationSettled:
			u.Spend.Micros += r.Settled.Micros
			u.RemoteJobs++
		}
	}
	return u
}

type usage struct {
	Spend      money.Amount
	RemoteJobs int
}
