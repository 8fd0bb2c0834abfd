package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/taskgate/taskgate/ledger"
)

// ExerciseChain runs the hash chain tests, each on a fresh, migrated,
// empty ledger from newLedger (only its Store and DB are used): an
// untouched ledger verifies, every event row edited, deleted or reordered
// in the database names its operation and event, and concurrent appends
// to one operation never fork its chain.
func ExerciseChain(t *testing.T, newLedger func(t *testing.T) Ledger) {
	t.Run("Untouched", func(t *testing.T) { t.Parallel(); testChainUntouched(t, newLedger(t)) })
	t.Run("Tampered", func(t *testing.T) { t.Parallel(); testChainTampered(t, newLedger) })
	t.Run("ConcurrentAppends", func(t *testing.T) {
		t.Parallel()
		testChainConcurrentAppends(t, []ledger.Store{newLedger(t).Store})
	})
}

// history writes what a gateway writes for one operation that completes:
// the acceptance and its client's result, a retry with other arguments
// (a conflict), the send, the remote job and the result. It returns the
// operation and its events, oldest first: client_result, conflict,
// send_started, remote_job_bound, result_stored.
func history(t *testing.T, s ledger.Store, tenant, key string) (*ledger.Operation, []*ledger.Event) {
	t.Helper()
	ctx := context.Background()
	res := accept(t, s, params(t, call{tenant, key, `{"suite":"settlement"}`}))
	op := res.Operation
	if op.ChainHead != "" {
		t.Fatalf("a created operation's chain head = %q, want it empty", op.ChainHead)
	}
	if err := s.AttemptSetClientResult(ctx, res.Attempt.RequestID, ledger.ClientDelivered); err != nil {
		t.Fatal(err)
	}
	if r := accept(t, s, params(t, call{tenant, key, `{"suite":"other"}`})); r.Decision != ledger.DecisionConflict {
		t.Fatalf("a retry with other arguments: %s, want conflict", r.Decision)
	}
	yes := true
	for _, tp := range []*ledger.TransitionParams{
		{From: []ledger.State{ledger.StateAccepted}, To: ledger.StateSending, IncrementSend: true,
			Events: []ledger.EventParams{{Kind: ledger.EventSendStarted, Data: ledger.SendStartedData{Send: 1, Worker: "w1"}}}},
		{From: []ledger.State{ledger.StateSending}, To: ledger.StateRunning,
			RemoteJobs: []*ledger.RemoteJobUpsert{{Upstream: "hosted_test", RemoteJobID: "job-" + key, Kind: ledger.JobKindProviderJob, Status: ledger.JobRunning, Intended: &yes}},
			Events:     []ledger.EventParams{{Kind: ledger.EventRemoteJobBound, AttemptRef: res.Attempt.ID, Data: ledger.RemoteJobData{RemoteJobID: "job-" + key}}}},
		{From: []ledger.State{ledger.StateRunning}, To: ledger.StateCompleted, Result: json.RawMessage(`{"content":[]}`),
			Events: []ledger.EventParams{{Kind: ledger.EventResultStored, Data: ledger.ResultStoredData{RemoteJobID: "job-" + key}}}},
	} {
		tp.OperationRef = op.ID
		var err error
		if op, err = s.Transition(ctx, tp); err != nil {
			t.Fatalf("%s: %v", tp.To, err)
		}
	}
	events, err := s.EventList(ctx, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := []ledger.EventKind{ledger.EventClientResult, ledger.EventConflict, ledger.EventSendStarted, ledger.EventRemoteJobBound, ledger.EventResultStored}
	if len(events) != len(want) {
		t.Fatalf("%s/%s has %d events, want %d", tenant, key, len(events), len(want))
	}
	for i, e := range events {
		if e.Kind != want[i] {
			t.Fatalf("event %d of %s/%s is %s, want %s", i, tenant, key, e.Kind, want[i])
		}
	}
	return op, events
}

// chains reads every chain of s, a few at a time to cross the pages.
func chains(t *testing.T, s ledger.Store, p ledger.ChainListParams) []*ledger.Chain {
	t.Helper()
	p.Limit = 2
	var out []*ledger.Chain
	for {
		page, err := s.ChainList(context.Background(), &p)
		if err != nil {
			t.Fatalf("ChainList: %v", err)
		}
		out = append(out, page...)
		if len(page) < p.Limit {
			return out
		}
		p.AfterRef = page[len(page)-1].OperationRef
	}
}

func testChainUntouched(t *testing.T, l Ledger) {
	ctx := context.Background()
	s := l.Store
	a, aEvents := history(t, s, "acme", "op-1")
	b, _ := history(t, s, "beta", "op-1")
	quiet := accept(t, s, params(t, call{"acme", "op-quiet", `{}`})).Operation
	// A denial that names no operation is outside every chain.
	if _, err := s.AttemptRecord(ctx, &ledger.AttemptRecordParams{RequestID: ledger.NewRequestID(), Tenant: "acme",
		Decision: ledger.DecisionDenied, Reason: ledger.ReasonOperationIDRequired, Source: "storetest"}); err != nil {
		t.Fatal(err)
	}
	var unchained int
	if err := l.DB.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE operation_ref IS NULL AND hash IS NULL AND prev_hash IS NULL`).Scan(&unchained); err != nil {
		t.Fatal(err)
	}
	if unchained != 1 {
		t.Errorf("%d events of no operation are stored without a hash, want the one denial", unchained)
	}

	// Each event links to the one before; the head is the last one's.
	prev := ""
	for _, e := range aEvents {
		if e.PrevHash != prev || len(e.Hash) != 64 {
			t.Fatalf("event %d (%s): hash %q after %q, want a SHA-256 after %q", e.ID, e.Kind, e.Hash, e.PrevHash, prev)
		}
		if h, err := ledger.EventHash(e); err != nil || h != e.Hash {
			t.Fatalf("event %d (%s) stored hash %s, EventHash of what was read is %s (%v)", e.ID, e.Kind, e.Hash, h, err)
		}
		prev = e.Hash
	}
	if a.ChainHead != prev {
		t.Errorf("operation's chain head = %q, want its last event's hash %q", a.ChainHead, prev)
	}
	if got, err := s.OperationGet(ctx, &ledger.OperationGetParams{ID: a.ID}); err != nil || got.ChainHead != prev {
		t.Errorf("OperationGet chain head = %v, %v; want %q", got, err, prev)
	}

	all := chains(t, s, ledger.ChainListParams{})
	if len(all) != 3 {
		t.Fatalf("ChainList read %d chains, want 3", len(all))
	}
	for _, c := range all {
		check := c.Check()
		if check.Break != nil {
			t.Errorf("%s/%s: %s at event %+v: %s", c.Tenant, c.OperationID, check.Break.Problem, check.Break.Event, check.Break.Detail)
		}
		if check.FromMigration || check.Unchained != 0 {
			t.Errorf("%s/%s: chain from the migration %v, %d events before it; want a chain from its creation", c.Tenant, c.OperationID, check.FromMigration, check.Unchained)
		}
	}
	if all[0].OperationRef != a.ID || all[1].OperationRef != b.ID || all[2].OperationRef != quiet.ID {
		t.Errorf("ChainList read operations %d, %d, %d; want %d, %d, %d, oldest first", all[0].OperationRef, all[1].OperationRef, all[2].OperationRef, a.ID, b.ID, quiet.ID)
	}
	if c := all[0]; c.Tenant != "acme" || c.OperationID != "op-1" || c.Head != a.ChainHead || len(c.Events) != len(aEvents) {
		t.Errorf("chain of acme/op-1 = %s/%s head %q with %d events; want head %q and %d events", c.Tenant, c.OperationID, c.Head, len(c.Events), a.ChainHead, len(aEvents))
	}
	if c := all[2]; len(c.Events) != 0 || c.Head != "" || c.Check().Chained != 0 {
		t.Errorf("chain of an operation without events: head %q, %d events; want none", c.Head, len(c.Events))
	}

	for name, tt := range map[string]struct {
		p    ledger.ChainListParams
		want []int64
	}{
		"one tenant":        {ledger.ChainListParams{Tenant: "acme"}, []int64{a.ID, quiet.ID}},
		"one operation ID":  {ledger.ChainListParams{OperationIDs: []string{"op-1"}}, []int64{a.ID, b.ID}},
		"both":              {ledger.ChainListParams{Tenant: "beta", OperationIDs: []string{"op-1", "op-quiet"}}, []int64{b.ID}},
		"several IDs":       {ledger.ChainListParams{OperationIDs: []string{"op-quiet", "op-1"}}, []int64{a.ID, b.ID, quiet.ID}},
		"an ID none uses":   {ledger.ChainListParams{OperationIDs: []string{"op-none"}}, nil},
		"after a row":       {ledger.ChainListParams{AfterRef: a.ID}, []int64{b.ID, quiet.ID}},
		"after the last":    {ledger.ChainListParams{AfterRef: quiet.ID}, nil},
		"another tenant ID": {ledger.ChainListParams{Tenant: "beta", OperationIDs: []string{"op-quiet"}}, nil},
	} {
		var got []int64
		for _, c := range chains(t, s, tt.p) {
			got = append(got, c.OperationRef)
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%s: ChainList read operations %v, want %v", name, got, tt.want)
		}
	}
}

// testChainTampered changes one event row of beta/op-1 directly in the
// database, as someone with access to it could, and checks that its chain
// names the event while acme/op-1's still holds.
func testChainTampered(t *testing.T, newLedger func(t *testing.T) Ledger) {
	// Each case returns the row ID of the event the check must name and
	// the kind that event then has.
	tests := []struct {
		name    string
		tamper  func(t *testing.T, l Ledger, events []*ledger.Event) (int64, ledger.EventKind)
		problem ledger.ChainProblem
	}{
		{"data edited", func(t *testing.T, l Ledger, ev []*ledger.Event) (int64, ledger.EventKind) {
			exec(t, l, `UPDATE events SET data = $1 WHERE id = $2`, `{"client_result":"timed_out","request_id":"req"}`, ev[0].ID)
			return ev[0].ID, ev[0].Kind
		}, ledger.ChainEdited},
		{"kind edited", func(t *testing.T, l Ledger, ev []*ledger.Event) (int64, ledger.EventKind) {
			exec(t, l, `UPDATE events SET kind = $1 WHERE id = $2`, ledger.EventFailed, ev[4].ID)
			return ev[4].ID, ledger.EventFailed
		}, ledger.ChainEdited},
		{"attempt edited", func(t *testing.T, l Ledger, ev []*ledger.Event) (int64, ledger.EventKind) {
			exec(t, l, `UPDATE events SET attempt_ref = NULL WHERE id = $1`, ev[3].ID)
			return ev[3].ID, ev[3].Kind
		}, ledger.ChainEdited},
		{"a middle event deleted", func(t *testing.T, l Ledger, ev []*ledger.Event) (int64, ledger.EventKind) {
			exec(t, l, `DELETE FROM events WHERE id = $1`, ev[2].ID)
			return ev[3].ID, ev[3].Kind
		}, ledger.ChainMissing},
		{"the first event deleted", func(t *testing.T, l Ledger, ev []*ledger.Event) (int64, ledger.EventKind) {
			exec(t, l, `DELETE FROM events WHERE id = $1`, ev[0].ID)
			return ev[1].ID, ev[1].Kind
		}, ledger.ChainMissing},
		{"the last event deleted", func(t *testing.T, l Ledger, ev []*ledger.Event) (int64, ledger.EventKind) {
			exec(t, l, `DELETE FROM events WHERE id = $1`, ev[4].ID)
			return ev[3].ID, ev[3].Kind
		}, ledger.ChainMissing},
		{"two events' places swapped", func(t *testing.T, l Ledger, ev []*ledger.Event) (int64, ledger.EventKind) {
			// Row IDs are the order events were written in: swapping two
			// swaps their places, each row keeping its content.
			exec(t, l, `UPDATE events SET id = $1 WHERE id = $2`, -ev[1].ID, ev[1].ID)
			exec(t, l, `UPDATE events SET id = $1 WHERE id = $2`, ev[1].ID, ev[2].ID)
			exec(t, l, `UPDATE events SET id = $1 WHERE id = $2`, ev[2].ID, -ev[1].ID)
			return ev[1].ID, ev[2].Kind
		}, ledger.ChainReordered},
		{"an event moved to another operation", func(t *testing.T, l Ledger, ev []*ledger.Event) (int64, ledger.EventKind) {
			var other int64
			if err := l.DB.QueryRowContext(context.Background(), `SELECT id FROM operations WHERE tenant = 'gamma'`).Scan(&other); err != nil {
				t.Fatal(err)
			}
			exec(t, l, `UPDATE events SET operation_ref = $1 WHERE id = $2`, other, ev[2].ID)
			return ev[3].ID, ev[3].Kind
		}, ledger.ChainMissing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := newLedger(t)
			intact, _ := history(t, l.Store, "acme", "op-1")
			tampered, events := history(t, l.Store, "beta", "op-1")
			// A third operation after the tampered one, for the event
			// moved to another operation.
			history(t, l.Store, "gamma", "op-1")
			id, kind := tt.tamper(t, l, events)

			var broken []*ledger.Chain
			for _, c := range chains(t, l.Store, ledger.ChainListParams{}) {
				if c.Check().Break != nil {
					broken = append(broken, c)
				}
			}
			if len(broken) == 0 || broken[0].OperationRef != tampered.ID {
				names := make([]string, len(broken))
				for i, c := range broken {
					names[i] = c.Tenant + "/" + c.OperationID
				}
				t.Fatalf("chains that do not hold: %v; want beta/op-1 first, and acme/op-1 (%d) intact", names, intact.ID)
			}
			b := broken[0].Check().Break
			if b.Problem != tt.problem || b.Event == nil || b.Event.ID != id || b.Event.Kind != kind {
				t.Fatalf("beta/op-1: %s at %+v (%s); want %s at event %d (%s)", b.Problem, b.Event, b.Detail, tt.problem, id, kind)
			}
		})
	}
}

func exec(t *testing.T, l Ledger, q string, args ...any) {
	t.Helper()
	if _, err := l.DB.ExecContext(context.Background(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// testChainConcurrentAppends appends to one operation's chain from many
// transactions at once, spread over stores: workers' transitions, the
// client results of attempts that attached to it and retries with other
// arguments (conflicts), both of which acceptance commits in groups. Every
// append must follow the one before: the chain holds and counts them all.
func testChainConcurrentAppends(t *testing.T, stores []ledger.Store) {
	const (
		writers = 8
		each    = 5
	)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first := accept(t, stores[0], params(t, call{"acme", "op-1", `{"suite":"x"}`}))
	attached := make([]*ledger.AcceptResult, writers)
	for i := range attached {
		attached[i] = accept(t, stores[i%len(stores)], params(t, call{"acme", "op-1", `{"suite":"x"}`}))
		if attached[i].Decision != ledger.DecisionAttached {
			t.Fatalf("retry %d: %s, want attached", i, attached[i].Decision)
		}
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}
	for w := range writers {
		s := stores[w%len(stores)]
		wg.Go(func() {
			for i := range each {
				if _, err := s.Transition(ctx, &ledger.TransitionParams{OperationRef: first.Operation.ID,
					Events: []ledger.EventParams{{Kind: ledger.EventLookup, Data: ledger.LookupData{Answer: "accepted", Detail: fmt.Sprintf("writer %d, look-up %d", w, i)}}}}); err != nil {
					fail(fmt.Errorf("writer %d, transition %d: %w", w, i, err))
				}
			}
		})
		wg.Go(func() {
			if err := s.AttemptSetClientResult(ctx, attached[w].Attempt.RequestID, ledger.ClientDelivered); err != nil {
				fail(fmt.Errorf("client result %d: %w", w, err))
			}
		})
		wg.Go(func() {
			for i := range each {
				res, err := s.Accept(ctx, params(t, call{"acme", "op-1", fmt.Sprintf(`{"suite":"x","retry":%d}`, w*each+i)}))
				switch {
				case err != nil:
					fail(fmt.Errorf("conflicting retry %d/%d: %w", w, i, err))
				case res.Decision != ledger.DecisionConflict:
					fail(fmt.Errorf("conflicting retry %d/%d: %s, want conflict", w, i, res.Decision))
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	cs, err := stores[0].ChainList(ctx, &ledger.ChainListParams{})
	if err != nil || len(cs) != 1 {
		t.Fatalf("ChainList: %d chains, %v; want 1", len(cs), err)
	}
	check := cs[0].Check()
	if check.Break != nil {
		t.Fatalf("the chain appended to at once: %s at %+v: %s", check.Break.Problem, check.Break.Event, check.Break.Detail)
	}
	if want := 2*writers*each + writers; check.Chained != want {
		t.Errorf("the chain links %d events, want %d", check.Chained, want)
	}
}
