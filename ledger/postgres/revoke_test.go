package postgres_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/taskgate/taskgate/canon"
	"github.com/taskgate/taskgate/internal/pgtest"
	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
)

// An acceptance decides on its approval as it is once locked. Here the
// approval is revoked by a transaction that commits while the acceptance
// waits for the approval's row lock, after the acceptance first read it
// unrevoked: the acceptance must be denied, not run on what it first read.
func TestAcceptanceRereadsTheLockedApproval(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := open(t, pgtest.Schema(t), true)
	a, err := s.ApprovalCreate(ctx, &ledger.Approval{
		Tenant: "acme", OperationID: "op-1", Tool: "hosted_test.run_suite",
		MaxTotalCost: money.MustParse("20.00", "USD"), MaxRemoteJobs: 1,
		RetryPolicy: "lookup_then_attach", ExpiresAt: time.Now().Add(time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}

	// The revoking transaction holds the approval's row until it commits.
	revoker, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer revoker.Rollback(ctx)
	if _, err := revoker.Exec(ctx, `UPDATE approvals SET revoked_at = now() WHERE id = $1`, a.ID); err != nil {
		t.Fatal(err)
	}
	var revokerPID int
	if err := revoker.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&revokerPID); err != nil {
		t.Fatal(err)
	}

	fp, err := canon.Compute("hosted_test", "run_suite", json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		res *ledger.AcceptResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := s.Accept(ctx, &ledger.AcceptParams{
			Tenant: "acme", OperationID: "op-1", Upstream: "hosted_test", Tool: "run_suite", Fingerprint: string(fp),
			Arguments: json.RawMessage(`{}`), RequestID: ledger.NewRequestID(), TaskID: ledger.NewTaskID(),
			Approval: ledger.ApprovalRequirement{Required: true, Estimate: money.MustParse("18.00", "USD")},
		})
		done <- outcome{res, err}
	}()
	// Commit the revocation only once the acceptance waits for the row.
	testwait.Until(t, ctx, "the acceptance to wait for the approval's lock", func() (bool, error) {
		select {
		case o := <-done:
			t.Fatalf("the acceptance decided %+v (%v) without waiting for the approval's lock", o.res, o.err)
		default:
		}
		var waiting int
		if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, revokerPID).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting > 0, nil
	})
	if err := revoker.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	if o.res.Decision != ledger.DecisionDenied || o.res.Reason != ledger.ReasonApprovalExpired {
		t.Fatalf("acceptance under an approval revoked while it waited: %s (%s), want denied (%s)", o.res.Decision, o.res.Reason, ledger.ReasonApprovalExpired)
	}
	if _, err := s.OperationGet(ctx, &ledger.OperationGetParams{Tenant: "acme", OperationID: "op-1"}); err == nil {
		t.Fatal("the denied acceptance left an operation")
	}
}
