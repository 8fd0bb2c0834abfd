package sqlstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/pgtest"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/postgres"
	"github.com/taskgate/taskgate/ledger/sqlite"
	"github.com/taskgate/taskgate/money"
)

// stores runs test against a fresh, migrated store of each database; the
// PostgreSQL one is skipped with a notice when no server is configured.
func stores(t *testing.T, test func(t *testing.T, s ledger.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "ledger.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if err := s.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		test(t, s)
	})
	t.Run("postgres", func(t *testing.T) {
		s, err := postgres.Open(context.Background(), pgtest.Schema(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if err := s.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		test(t, s)
	})
}

var now = time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)

func question(nonce string) *ledger.ApprovalQuestion {
	return &ledger.ApprovalQuestion{
		Nonce: nonce, Tenant: "acme", OperationID: "op-1", Tool: "hosted_test.run_suite",
		Fingerprint: "fp-1", Estimate: money.FromMicros(18_000_000, "USD"),
		CreatedAt: now, ExpiresAt: now.Add(15 * time.Minute),
	}
}

func take(q *ledger.ApprovalQuestion, at time.Time) *ledger.ApprovalQuestionTakeParams {
	return &ledger.ApprovalQuestionTakeParams{
		Nonce: q.Nonce, Tenant: q.Tenant, OperationID: q.OperationID, Tool: q.Tool, Fingerprint: q.Fingerprint, Now: at,
	}
}

func TestApprovalQuestionTakenOnlyWhenItMatches(t *testing.T) {
	stores(t, func(t *testing.T, s ledger.Store) {
		ctx := context.Background()
		q, err := s.ApprovalQuestionCreate(ctx, question("nonce-aaaaaaaaaaaaaaaa"))
		if err != nil {
			t.Fatal(err)
		}
		if q.ID == 0 || q.Estimate.String() != "18.00" || !q.AnsweredAt.IsZero() {
			t.Fatalf("created question = %+v", q)
		}
		for _, tt := range []struct {
			name   string
			change func(p *ledger.ApprovalQuestionTakeParams)
		}{
			{"another nonce", func(p *ledger.ApprovalQuestionTakeParams) { p.Nonce = "nonce-bbbbbbbbbbbbbbbb" }},
			{"no nonce", func(p *ledger.ApprovalQuestionTakeParams) { p.Nonce = "" }},
			{"another tenant", func(p *ledger.ApprovalQuestionTakeParams) { p.Tenant = "globex" }},
			{"another operation", func(p *ledger.ApprovalQuestionTakeParams) { p.OperationID = "op-2" }},
			{"another tool", func(p *ledger.ApprovalQuestionTakeParams) { p.Tool = "hosted_test.other" }},
			{"other arguments", func(p *ledger.ApprovalQuestionTakeParams) { p.Fingerprint = "fp-2" }},
			{"after expiry", func(p *ledger.ApprovalQuestionTakeParams) { p.Now = now.Add(16 * time.Minute) }},
		} {
			p := take(q, now.Add(time.Minute))
			tt.change(p)
			if got, err := s.ApprovalQuestionTake(ctx, p); !errors.Is(err, ledger.ErrNotFound) {
				t.Errorf("%s: take = %+v, %v; want ErrNotFound", tt.name, got, err)
			}
		}
		got, err := s.ApprovalQuestionTake(ctx, take(q, now.Add(time.Minute)))
		if err != nil || got.ID != q.ID || !got.AnsweredAt.Equal(now.Add(time.Minute)) {
			t.Fatalf("matching take = %+v, %v; want question %d answered at %s", got, err, q.ID, now.Add(time.Minute))
		}
		if got, err := s.ApprovalQuestionTake(ctx, take(q, now.Add(2*time.Minute))); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("second take = %+v, %v; want ErrNotFound: an answer counts once", got, err)
		}
	})
}

func TestApprovalQuestionConcurrentTakes(t *testing.T) {
	stores(t, func(t *testing.T, s ledger.Store) {
		ctx := context.Background()
		q, err := s.ApprovalQuestionCreate(ctx, question("nonce-cccccccccccccccc"))
		if err != nil {
			t.Fatal(err)
		}
		var won, lost atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				_, err := s.ApprovalQuestionTake(ctx, take(q, now.Add(time.Minute)))
				switch {
				case err == nil:
					won.Add(1)
				case errors.Is(err, ledger.ErrNotFound):
					lost.Add(1)
				default:
					t.Errorf("take: %v", err)
				}
			})
		}
		wg.Wait()
		if won.Load() != 1 || lost.Load() != 7 {
			t.Fatalf("of 8 concurrent takes %d succeeded and %d found nothing; want 1 and 7", won.Load(), lost.Load())
		}
	})
}

func TestApprovalQuestionRefusesIncompleteQuestions(t *testing.T) {
	stores(t, func(t *testing.T, s ledger.Store) {
		for _, tt := range []struct {
			name   string
			change func(q *ledger.ApprovalQuestion)
		}{
			{"short nonce", func(q *ledger.ApprovalQuestion) { q.Nonce = "short" }},
			{"no tenant", func(q *ledger.ApprovalQuestion) { q.Tenant = "" }},
			{"no fingerprint", func(q *ledger.ApprovalQuestion) { q.Fingerprint = "" }},
			{"no expiry", func(q *ledger.ApprovalQuestion) { q.ExpiresAt = time.Time{} }},
		} {
			q := question("nonce-dddddddddddddddd")
			tt.change(q)
			if got, err := s.ApprovalQuestionCreate(context.Background(), q); err == nil {
				t.Errorf("%s: created %+v; want an error", tt.name, got)
			}
		}
		if _, err := s.ApprovalQuestionCreate(context.Background(), question("nonce-eeeeeeeeeeeeeeee")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ApprovalQuestionCreate(context.Background(), question("nonce-eeeeeeeeeeeeeeee")); err == nil {
			t.Fatal("a second question with the same nonce was recorded")
		}
	})
}

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestAPIKeyRoles(t *testing.T) {
	stores(t, func(t *testing.T, s ledger.Store) {
		ctx := context.Background()
		for _, tt := range []struct{ role, want string }{{"", ledger.RoleAgent}, {ledger.RoleAgent, ledger.RoleAgent}, {ledger.RoleApprover, ledger.RoleApprover}} {
			plain := "key-" + tt.role
			k, err := s.KeyCreate(ctx, &ledger.APIKey{Tenant: "acme", Hash: hash(plain), Role: tt.role})
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.KeyByHash(ctx, hash(plain))
			if err != nil || k.Role != tt.want || got.Role != tt.want {
				t.Errorf("key created with role %q: created %q, looked up %q (%v); want %q", tt.role, k.Role, got.Role, err, tt.want)
			}
		}
		if k, err := s.KeyCreate(ctx, &ledger.APIKey{Tenant: "acme", Hash: hash("admin"), Role: "admin"}); err == nil {
			t.Fatalf("KeyCreate with role admin = %+v; want an error", k)
		}
	})
}
