package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/taskgate/taskgate/ledger"
)

// testAttemptRuns: every kind of attempt keeps the run ID and session ID
// it came with, and reads them back.
func testAttemptRuns(t *testing.T, newStore Factory) {
	s := newStore(t)
	ctx := context.Background()
	tagged := func(p *ledger.AcceptParams, run, session string) *ledger.AcceptParams {
		p.RunID, p.SessionID = run, session
		return p
	}
	if _, err := s.ApprovalCreate(ctx, approval("acme", "op-approved", "20.00", 1, time.Now().Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	created := accept(t, s, tagged(needsApproval(params(t, call{"acme", "op-approved", `{"suite":"a"}`}), "18.00"), "run-1", "session-1"))
	attached := accept(t, s, tagged(needsApproval(params(t, call{"acme", "op-approved", `{"suite":"a"}`}), "18.00"), "run-2", ""))
	conflict := accept(t, s, tagged(needsApproval(params(t, call{"acme", "op-approved", `{"suite":"b"}`}), "18.00"), "", "session-2"))
	// A new operation ID for the approved arguments is a denied retry that
	// points at the approved operation.
	denied := accept(t, s, tagged(needsApproval(params(t, call{"acme", "op-again", `{"suite":"a"}`}), "18.00"), "run-3", "session-3"))
	for _, tc := range []struct {
		res      *ledger.AcceptResult
		decision ledger.Decision
	}{{created, ledger.DecisionCreated}, {attached, ledger.DecisionAttached}, {conflict, ledger.DecisionConflict}, {denied, ledger.DecisionDenied}} {
		if tc.res.Decision != tc.decision {
			t.Fatalf("decision = %s (%s), want %s", tc.res.Decision, tc.res.Reason, tc.decision)
		}
	}
	recorded, err := s.AttemptRecord(ctx, &ledger.AttemptRecordParams{
		RequestID: ledger.NewRequestID(), Tenant: "acme", Decision: ledger.DecisionDenied, Reason: ledger.ReasonOperationIDRequired,
		RunID: "run-4", SessionID: "session-4",
	})
	if err != nil {
		t.Fatal(err)
	}
	if recorded.RunID != "run-4" || recorded.SessionID != "session-4" {
		t.Errorf("AttemptRecord returned run %q, session %q; want run-4, session-4", recorded.RunID, recorded.SessionID)
	}

	atts, err := s.AttemptList(ctx, created.Operation.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got [][3]string
	for _, a := range atts {
		got = append(got, [3]string{string(a.Decision), a.RunID, a.SessionID})
	}
	want := [][3]string{{"created", "run-1", "session-1"}, {"attached", "run-2", ""}, {"conflict", "", "session-2"}, {"denied", "run-3", "session-3"}}
	if !slices.Equal(got, want) {
		t.Fatalf("attempts as (decision, run, session) = %v, want %v", got, want)
	}
	for i, res := range []*ledger.AcceptResult{created, attached, conflict, denied} {
		if res.Attempt.RunID != atts[i].RunID || res.Attempt.SessionID != atts[i].SessionID {
			t.Errorf("Accept returned attempt %d with run %q, session %q; the ledger holds %q, %q",
				i, res.Attempt.RunID, res.Attempt.SessionID, atts[i].RunID, atts[i].SessionID)
		}
	}
}

// testOperationsOfARun selects operations by run, session, tenant, time
// and a list of operation IDs, alone and together.
func testOperationsOfARun(t *testing.T, newStore Factory) {
	s := newStore(t)
	ctx := context.Background()
	t0 := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	at := func(p *ledger.AcceptParams, minutes int, run, session string) *ledger.AcceptParams {
		p.Now, p.RunID, p.SessionID = t0.Add(time.Duration(minutes)*time.Minute), run, session
		return p
	}
	// run-a makes op-1 and op-2 on session s-1; run-b retries op-2 and
	// makes op-3; run-c's call conflicts with op-1, so it caused nothing;
	// globex uses the same run ID for an operation of its own.
	accept(t, s, at(params(t, call{"acme", "op-1", `{"n":1}`}), 0, "run-a", "s-1"))
	accept(t, s, at(params(t, call{"acme", "op-2", `{"n":2}`}), 10, "run-a", "s-1"))
	accept(t, s, at(params(t, call{"acme", "op-2", `{"n":2}`}), 20, "run-b", "s-2"))
	accept(t, s, at(params(t, call{"acme", "op-3", `{"n":3}`}), 30, "run-b", "s-2"))
	if res := accept(t, s, at(params(t, call{"acme", "op-1", `{"n":9}`}), 40, "run-c", "s-3")); res.Decision != ledger.DecisionConflict {
		t.Fatalf("run-c's call = %s, want conflict", res.Decision)
	}
	accept(t, s, at(params(t, call{"globex", "op-1", `{"n":1}`}), 50, "run-a", ""))
	accept(t, s, at(params(t, call{"acme", "op-4", `{"n":4}`}), 60, "", ""))

	for _, tc := range []struct {
		name string
		p    ledger.OperationListParams
		want []string
	}{
		{"run across tenants", ledger.OperationListParams{RunID: "run-a"}, []string{"globex/op-1", "acme/op-2", "acme/op-1"}},
		{"run of one tenant", ledger.OperationListParams{RunID: "run-a", Tenant: "acme"}, []string{"acme/op-2", "acme/op-1"}},
		{"a retry brings its operation into the run", ledger.OperationListParams{RunID: "run-b"}, []string{"acme/op-3", "acme/op-2"}},
		{"a conflict brings nothing", ledger.OperationListParams{RunID: "run-c"}, nil},
		{"unknown run", ledger.OperationListParams{RunID: "run-z"}, nil},
		{"session", ledger.OperationListParams{SessionID: "s-1"}, []string{"acme/op-2", "acme/op-1"}},
		{"session and run", ledger.OperationListParams{SessionID: "s-2", RunID: "run-a"}, []string{"acme/op-2"}},
		{"since", ledger.OperationListParams{Tenant: "acme", CreatedFrom: t0.Add(30 * time.Minute)}, []string{"acme/op-4", "acme/op-3"}},
		{"until", ledger.OperationListParams{CreatedBefore: t0.Add(30 * time.Minute)}, []string{"acme/op-2", "acme/op-1"}},
		{"between", ledger.OperationListParams{CreatedFrom: t0.Add(10 * time.Minute), CreatedBefore: t0.Add(50 * time.Minute)}, []string{"acme/op-3", "acme/op-2"}},
		{"run and time", ledger.OperationListParams{RunID: "run-a", CreatedFrom: t0.Add(time.Minute)}, []string{"globex/op-1", "acme/op-2"}},
		{"operation IDs", ledger.OperationListParams{OperationIDs: []string{"op-1", "op-3", "op-none"}}, []string{"globex/op-1", "acme/op-3", "acme/op-1"}},
		{"operation IDs of one tenant in a run", ledger.OperationListParams{Tenant: "acme", RunID: "run-b", OperationIDs: []string{"op-1", "op-3"}}, []string{"acme/op-3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops, err := s.OperationList(ctx, &tc.p)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(ops); !slices.Equal(got, tc.want) {
				t.Errorf("OperationList(%+v) = %v, want %v", tc.p, got, tc.want)
			}
		})
	}
	// A run pages like any other list.
	first, err := s.OperationList(ctx, &ledger.OperationListParams{RunID: "run-a", Limit: 2})
	if err != nil || len(first) != 2 {
		t.Fatalf("first page = %v, %v", ids(first), err)
	}
	rest, err := s.OperationList(ctx, &ledger.OperationListParams{RunID: "run-a", Limit: 2, BeforeID: first[1].ID})
	if err != nil || !slices.Equal(ids(rest), []string{"acme/op-1"}) {
		t.Fatalf("second page = %v, %v; want acme/op-1", ids(rest), err)
	}
}

// migrationRecordsRuns checks migration 00012: an attempt recorded before
// it reads back with no run and no session, and one after it keeps both.
func migrationRecordsRuns(t *testing.T, l Ledger) {
	ctx := context.Background()
	migrateTo(t, l, 9)
	for _, q := range []string{
		`INSERT INTO operations (id, tenant, operation_id, task_id, upstream, tool, fingerprint, arguments,
			state, retry_policy, estimate_micros, currency, ttl_ms, created_at, updated_at, intended_remote_jobs, priced, schema_version)
		VALUES (1000, 'acme', 'op-old', 'task-1', 'hosted_test', 'run_suite', 'fp', '{}', 'running', 'lookup_then_attach', 0, 'USD', 0, ` + l.Now + `, ` + l.Now + `, 1, false, 9)`,
		`INSERT INTO attempts (request_id, tenant, operation_id, operation_ref, decision, fingerprint, source, created_at, updated_at)
		VALUES ('req-old', 'acme', 'op-old', 1000, 'created', 'fp', 'mcp/2026-07-28', ` + l.Now + `, ` + l.Now + `)`,
	} {
		if _, err := l.DB.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	atts, err := l.Store.AttemptList(ctx, 1000)
	if err != nil || len(atts) != 1 || atts[0].RunID != "" || atts[0].SessionID != "" {
		t.Fatalf("attempt from before the migration = %+v, %v; want one with no run and no session", atts, err)
	}
	p := params(t, call{"acme", "op-new", `{}`})
	p.RunID, p.SessionID = "run-1", "session-1"
	res := accept(t, l.Store, p)
	atts, err = l.Store.AttemptList(ctx, res.Operation.ID)
	if err != nil || len(atts) != 1 || atts[0].RunID != "run-1" || atts[0].SessionID != "session-1" {
		t.Fatalf("attempt after the migration = %+v, %v; want run-1 on session-1", atts, err)
	}
}
