package worker_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/dburl"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/provider"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/upstream"
	"github.com/taskgate/taskgate/worker"
)

// endingStore lets every operation the sweeper lists end just after it
// was listed, as when it is cancelled at that moment.
type endingStore struct {
	ledger.Store
}

func (s endingStore) OperationsToRecover(ctx context.Context, now time.Time, limit int) ([]*ledger.Operation, error) {
	ops, err := s.Store.OperationsToRecover(ctx, now, limit)
	for _, op := range ops {
		if _, err := s.Store.Transition(ctx, &ledger.TransitionParams{OperationRef: op.ID, To: ledger.StateCancelled}); err != nil {
			return nil, err
		}
	}
	return ops, err
}

// The sweeper queues an operation again only while it is still in the
// state it was found in: one that ended meanwhile gets no job.
func TestSweepSkipsOperationsThatEnded(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "taskgate.db")
	s, err := dburl.Open(ctx, db, &dburl.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	cfg, err := config.Parse(strings.NewReader(fixtures.ConfigYAML("http://127.0.0.1:1/mcp", "127.0.0.1:0", db, fixtures.ConfigOptions{})), filepath.Join(dir, "taskgate.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Accept(ctx, &ledger.AcceptParams{
		Tenant: tenant, OperationID: "op-swept", Upstream: "hosted_test", Tool: "run_suite", Fingerprint: "fp-swept",
		Arguments: json.RawMessage(`{}`), RequestID: ledger.NewRequestID(), TaskID: ledger.NewTaskID(), Source: "test",
		Approval: ledger.ApprovalRequirement{Estimate: money.Zero("USD")},
	})
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(&worker.Options{
		Store: endingStore{s}, Upstreams: worker.FromPool(upstream.NewPool(nil, nil)), Catalog: provider.NewCatalog(cfg), Config: cfg,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Sweep(ctx); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	op, err := s.OperationGet(ctx, &ledger.OperationGetParams{ID: res.Operation.ID})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(events(t, ctx, s, op, ledger.EventRecovered)); n != 0 || op.LeaseOwner != "" {
		t.Errorf("the ended operation got %d recovered event(s) and lease %q; want none", n, op.LeaseOwner)
	}
}
