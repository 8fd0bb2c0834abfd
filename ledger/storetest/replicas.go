package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/taskgate/taskgate/ledger"
)

// ReplicaFactory returns n stores over one fresh, migrated, empty
// database, each with a connection pool of its own, as n gateway replicas
// hold them. They are closed when the test ends.
type ReplicaFactory func(t *testing.T, n int) []ledger.Store

// ExerciseReplicas runs the part of the contract that concerns several
// gateway replicas on one database: every row of the acceptance table
// holds when the attempts of one operation race each other through
// different connection pools, and appends to one operation's hash chain
// from all of them never fork it.
func ExerciseReplicas(t *testing.T, newReplicas ReplicaFactory) {
	t.Run("ConcurrentAcceptance", func(t *testing.T) { t.Parallel(); testReplicaAcceptance(t, newReplicas) })
	t.Run("ConcurrentChainAppends", func(t *testing.T) { t.Parallel(); testChainConcurrentAppends(t, newReplicas(t, 4)) })
	t.Run("ConcurrentBudget", func(t *testing.T) { t.Parallel(); testReplicaBudget(t, newReplicas(t, 2)) })
}

// tally counts the decisions one (tenant, operation ID) got.
type tally struct {
	created, attached, conflict, denied int
	// reasons are the denial reasons allowed; a denial for any other
	// reason fails the test.
	reasons []string
}

// wave is a set of attempts sent at the same instant, spread over the
// replicas, and what each (tenant, operation ID) must get.
type wave struct {
	calls []call
	want  map[string]tally
}

// repeat is n attempts of c.
func repeat(n int, c call) []call {
	cs := make([]call, n)
	for i := range cs {
		cs[i] = c
	}
	return cs
}

func testReplicaAcceptance(t *testing.T, newReplicas ReplicaFactory) {
	const n = 64
	later := time.Now().Add(time.Hour)
	differing := make([]call, n)
	for i := range differing {
		differing[i] = call{"acme", "op-1", fmt.Sprintf(`{"s":%d}`, i)}
	}
	tests := []struct {
		name      string
		approvals []*ledger.Approval
		waves     []wave
		// operations, reservations and dispatch jobs the database holds
		// at the end.
		operations, reservations int
	}{
		{
			name:      "one operation ID, one fingerprint: one created, the rest attached",
			approvals: []*ledger.Approval{approval("acme", "op-1", "20.00", 1, later)},
			waves: []wave{{
				calls: repeat(n, call{"acme", "op-1", `{"s":1}`}),
				want:  map[string]tally{"acme/op-1": {created: 1, attached: n - 1}},
			}},
			operations: 1, reservations: 1,
		},
		{
			// Room for more jobs: policy admits every attempt, and the
			// insert itself finds the operation.
			name:      "one operation ID, one fingerprint, room for more jobs: still one created",
			approvals: []*ledger.Approval{approval("acme", "op-1", "100.00", 4, later)},
			waves: []wave{{
				calls: repeat(n, call{"acme", "op-1", `{"s":1}`}),
				want:  map[string]tally{"acme/op-1": {created: 1, attached: n - 1}},
			}},
			operations: 1, reservations: 1,
		},
		{
			name:      "one operation ID, different fingerprints: one created, the rest conflict",
			approvals: []*ledger.Approval{approval("acme", "op-1", "20.00", 1, later)},
			waves: []wave{{
				calls: differing,
				want:  map[string]tally{"acme/op-1": {created: 1, conflict: n - 1}},
			}},
			operations: 1, reservations: 1,
		},
		{
			// An attempt under the new ID that is decided before the first
			// operation has committed cannot know it repeats one: it has no
			// approval of its own. Once the first has committed, it is
			// named a retry.
			name:      "two operation IDs, the same arguments, one approval: one created, the other a retry",
			approvals: []*ledger.Approval{approval("acme", "op-1", "20.00", 1, later)},
			waves: []wave{{
				calls: append(repeat(n/2, call{"acme", "op-1", `{"s":1}`}), repeat(n/2, call{"acme", "op-2", `{"s":1}`})...),
				want: map[string]tally{
					"acme/op-1": {created: 1, attached: n/2 - 1},
					"acme/op-2": {denied: n / 2, reasons: []string{ledger.ReasonRetryUsesNewOperation, ledger.ReasonApprovalRequired}},
				},
			}, {
				calls: repeat(n/4, call{"acme", "op-2", `{"s":1}`}),
				want:  map[string]tally{"acme/op-2": {denied: n / 4, reasons: []string{ledger.ReasonRetryUsesNewOperation}}},
			}},
			operations: 1, reservations: 1,
		},
		{
			name: "another tenant's identical key is an operation of its own",
			approvals: []*ledger.Approval{
				approval("acme", "op-1", "20.00", 1, later),
				approval("globex", "op-1", "20.00", 1, later),
			},
			waves: []wave{{
				calls: append(repeat(n/2, call{"acme", "op-1", `{"s":1}`}), repeat(n/2, call{"globex", "op-1", `{"s":1}`})...),
				want: map[string]tally{
					"acme/op-1":   {created: 1, attached: n/2 - 1},
					"globex/op-1": {created: 1, attached: n/2 - 1},
				},
			}},
			operations: 2, reservations: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stores := newReplicas(t, 2)
			ctx := context.Background()
			var approvalRefs []int64
			for _, a := range tt.approvals {
				a, err := stores[0].ApprovalCreate(ctx, a)
				if err != nil {
					t.Fatal(err)
				}
				approvalRefs = append(approvalRefs, a.ID)
			}
			for w, wv := range tt.waves {
				ps := make([]*ledger.AcceptParams, len(wv.calls))
				for i, c := range wv.calls {
					ps[i] = needsApproval(params(t, c), "18.00")
				}
				results, errs := acceptAcross(ctx, stores, ps)
				got := map[string]tally{}
				for i, res := range results {
					if errs[i] != nil {
						t.Fatalf("wave %d: Accept(%s/%s): %v", w, ps[i].Tenant, ps[i].OperationID, errs[i])
					}
					key := ps[i].Tenant + "/" + ps[i].OperationID
					g := got[key]
					switch res.Decision {
					case ledger.DecisionCreated:
						g.created++
					case ledger.DecisionAttached:
						g.attached++
					case ledger.DecisionConflict:
						g.conflict++
					case ledger.DecisionDenied:
						g.denied++
						if !slices.Contains(wv.want[key].reasons, res.Reason) {
							t.Errorf("wave %d: %s denied with %q (%s); allowed: %q", w, key, res.Reason, res.Message, wv.want[key].reasons)
						}
					}
					got[key] = g
				}
				for key, want := range wv.want {
					g := got[key]
					if g.created != want.created || g.attached != want.attached || g.conflict != want.conflict || g.denied != want.denied {
						t.Errorf("wave %d: %s got created %d, attached %d, conflict %d, denied %d; want %d, %d, %d, %d",
							w, key, g.created, g.attached, g.conflict, g.denied, want.created, want.attached, want.conflict, want.denied)
					}
				}
			}
			if got := operationCount(t, stores[0]); got != tt.operations {
				t.Errorf("operations = %d, want %d", got, tt.operations)
			}
			if got := probeJobs(t, stores[0]); got != tt.operations {
				t.Errorf("dispatch jobs = %d, want %d", got, tt.operations)
			}
			reservations := 0
			for _, ref := range approvalRefs {
				rs, err := stores[0].ReservationList(ctx, ref)
				if err != nil {
					t.Fatal(err)
				}
				reservations += len(rs)
			}
			if reservations != tt.reservations {
				t.Errorf("reservations = %d, want %d", reservations, tt.reservations)
			}
		})
	}
}
