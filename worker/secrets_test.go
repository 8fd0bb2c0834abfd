package worker_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/canon"
	"github.com/taskgate/taskgate/internal/crashpoint"
	"github.com/taskgate/taskgate/internal/pgtest"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/sqlite"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/secrets"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
	"github.com/taskgate/taskgate/taskwire"
	"github.com/taskgate/taskgate/worker"
)

// liveToken is a secret argument value no other test uses.
func liveToken() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "sk-live-" + hex.EncodeToString(b)
}

// keyFile creates a secrets key file in a directory of its own.
func keyFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "taskgate.keys")
	if _, err := secrets.CreateFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// ledgerBytes is what a reader of the ledger's database sees: the SQLite
// file and its WAL, or the text of every row of the PostgreSQL schema.
func ledgerBytes(t *testing.T, ctx context.Context, db string) []byte {
	t.Helper()
	if path, ok := strings.CutPrefix(db, "sqlite:"); ok {
		var all []byte
		for _, p := range []string{path, path + "-wal"} {
			b, err := os.ReadFile(p)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Fatal(err)
			}
			all = append(all, b...)
		}
		return all
	}
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT quote_ident(table_name) FROM information_schema.tables WHERE table_schema = current_schema()`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(tables) == 0 {
		t.Fatalf("list the ledger's tables: %v, %v", tables, err)
	}
	var all []byte
	for _, table := range tables {
		var text *string
		if err := conn.QueryRow(ctx, `SELECT string_agg(t::text, E'\n') FROM `+table+` t`).Scan(&text); err != nil {
			t.Fatal(err)
		}
		if text != nil {
			all = append(all, *text...)
		}
	}
	return all
}

// storedToken is the token argument as the ledger holds it.
func storedToken(t *testing.T, op *ledger.Operation) string {
	t.Helper()
	var args map[string]any
	if err := json.Unmarshal(op.Arguments, &args); err != nil {
		t.Fatalf("stored arguments %s: %v", op.Arguments, err)
	}
	s, _ := args["token"].(string)
	return s
}

// TestSecretArgumentAcrossACrash: a consequential call carries a secret
// argument; the gateway, a real process, dies after "send started",
// before anything reached the provider. While the operation runs the
// ledger's database holds no plaintext of the secret; the recovery's
// re-send carries the real value to the provider; once the operation has
// ended and been reconciled the sealed value is gone too.
func TestSecretArgumentAcrossACrash(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { secretAcrossACrash(t, "", false) })
	t.Run("sqlite, key rotated while down", func(t *testing.T) { secretAcrossACrash(t, "", true) })
	t.Run("postgres", func(t *testing.T) { secretAcrossACrash(t, pgtest.Schema(t), false) })
}

func secretAcrossACrash(t *testing.T, db string, rotate bool) {
	ctx := testCtx(t, 90*time.Second)
	keys := keyFile(t)
	h := newHarness(t, &fixtures.Options{
		DB: db, Process: []string{gatewayBinary}, Env: []string{"TASKGATE_CRASHPOINT=" + crashpoint.AfterSendStarted},
		Config: fixtures.ConfigOptions{Lease: time.Second, NotFoundSafeAfter: new(time.Duration(0)), SecretArguments: []string{"token"}, SecretsKeyFile: keys},
		Sim:    providersim.Options{Faults: providersim.Faults{IgnoreIdempotencyKey: true}},
	})
	const opID = "op-secret-crash"
	logHistory(t, h.Store, opID)
	token := liveToken()
	cs := connect(t, ctx, h, fixtures.EraExtension)
	task := startTaskWith(t, ctx, cs, opID, map[string]any{"suite": "settlement", "token": token})

	if err := h.WaitOutput(ctx, "CRASHPOINT "+crashpoint.AfterSendStarted); err != nil {
		t.Fatal(err)
	}
	running := awaitOperation(t, ctx, h.Store, opID, func(op *ledger.Operation) bool { return op.State == ledger.StateSending })
	if running.TaskID != task.ID {
		t.Fatalf("operation task %s, client task %s", running.TaskID, task.ID)
	}
	sealed := storedToken(t, running)
	if running.SecretsAtRest != ledger.SecretsSealed || sealed == token || !strings.HasPrefix(sealed, "tgs1.") {
		t.Fatalf("while running the ledger keeps the token as %q (%s); want it sealed", sealed, running.SecretsAtRest)
	}
	if raw := ledgerBytes(t, ctx, h.Config.Database); bytes.Contains(raw, []byte(token)) {
		t.Fatal("the ledger's database holds the secret argument in plain text while the operation runs")
	}
	if err := h.Kill(); err != nil {
		t.Fatal(err)
	}
	if rotate {
		// A newer key seals from the restart on; the older still opens
		// what it sealed.
		if _, err := secrets.AddKey(keys); err != nil {
			t.Fatal(err)
		}
	}
	h.SetEnv()
	if err := h.Start(ctx); err != nil {
		t.Fatalf("restart the gateway: %v", err)
	}

	op := awaitOperation(t, ctx, h.Store, opID, endedOrReview)
	jobs := h.Sim.Jobs()
	if op.State != ledger.StateCompleted || len(jobs) != 1 {
		t.Fatalf("after the recovery: %s (%s, %s), provider jobs %+v; want completed with one job", op.State, op.ReviewReason, op.StatusMessage, jobs)
	}
	if jobs[0].Token != token {
		t.Fatalf("the provider received token %q, want the caller's %q", jobs[0].Token, token)
	}
	if n := len(events(t, ctx, h.Store, op, ledger.EventSendStarted)); n != 2 {
		t.Fatalf("send_started events = %d, want 2 (the send that died and the re-send)", n)
	}

	erased := awaitOperation(t, ctx, h.Store, opID, func(op *ledger.Operation) bool { return op.SecretsAtRest == ledger.SecretsErased })
	if got := storedToken(t, erased); got != secrets.Redacted {
		t.Fatalf("after the end the ledger keeps the token as %q, want %q", got, secrets.Redacted)
	}
	// The gateway stops, and what the database has written is moved into
	// its main file: what remains there is all a copy of it would hold.
	if err := h.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if s, ok := h.Store.(*sqlite.Store); ok {
		var busy, log, done int
		if err := s.DB().QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &log, &done); err != nil || busy != 0 {
			t.Fatalf("checkpoint: busy %d, %v", busy, err)
		}
	}
	raw := ledgerBytes(t, ctx, h.Config.Database)
	if bytes.Contains(raw, []byte(token)) || bytes.Contains(raw, []byte(sealed)) {
		t.Fatal("the ledger's database still holds the secret argument, or its sealed value, after the operation ended")
	}
}

// startTaskWith makes the consequential call with args from a tasks
// client and returns the task handle the gateway answered with.
func startTaskWith(t *testing.T, ctx context.Context, cs *mcp.ClientSession, opID string, args map[string]any) *taskwire.Task {
	t.Helper()
	task, res, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall(opID, args), nil)
	if err != nil || task == nil {
		t.Fatalf("tools/call %s = task %v, result %v, error %v; want a task", opID, task, res, err)
	}
	return task
}

// acceptDirect accepts a run_suite call as the gateway does, through the
// harness's store, with its dispatch job.
func acceptDirect(t *testing.T, ctx context.Context, h *fixtures.Harness, opID string, args map[string]any) *ledger.Operation {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	fp, err := canon.Compute("hosted_test", "run_suite", raw)
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Store.Accept(ctx, &ledger.AcceptParams{
		Tenant: tenant, OperationID: opID, Upstream: "hosted_test", Tool: "run_suite", Fingerprint: string(fp), Arguments: raw,
		RequestID: ledger.NewRequestID(), TaskID: ledger.NewTaskID(), Source: "test", RetryPolicy: ledger.RetryLookupThenAttach,
		Priced: true, SecretArguments: []string{"token"}, Approval: ledger.ApprovalRequirement{Estimate: money.MustParse("18.00", "USD")},
		Enqueue: worker.Dispatch, QueueLease: h.Config.Worker.Lease,
	})
	if err != nil || res.Decision != ledger.DecisionCreated {
		t.Fatalf("accept %s: %+v, %v", opID, res, err)
	}
	return res.Operation
}

// TestMovedCiphertext: a sealed secret copied from one operation's row
// into another's does not open there. That operation waits for review
// with a reason that says so, and nothing is sent for it; the operation
// the value belongs to runs as usual.
func TestMovedCiphertext(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	h := newHarness(t, &fixtures.Options{Config: fixtures.ConfigOptions{SecretArguments: []string{"token"}, SecretsKeyFile: keyFile(t)}})
	logHistory(t, h.Store, "op-moved")
	logHistory(t, h.Store, "op-own")
	if err := h.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	token := liveToken()
	own := acceptDirect(t, ctx, h, "op-own", map[string]any{"suite": "settlement", "token": token})
	moved := acceptDirect(t, ctx, h, "op-moved", map[string]any{"suite": "settlement", "token": liveToken()})
	if _, err := h.Store.(*sqlite.Store).DB().ExecContext(ctx, `UPDATE operations SET arguments = (SELECT arguments FROM operations WHERE id = ?) WHERE id = ?`, own.ID, moved.ID); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}

	review := awaitOperation(t, ctx, h.Store, "op-moved", endedOrReview)
	if review.State != ledger.StateReview || review.ReviewReason != ledger.ReasonSecretUndecryptable || review.SendCount != 0 {
		t.Fatalf("the operation with a moved secret is %s (reason %q, sends %d); want review for %s with nothing sent",
			review.State, review.ReviewReason, review.SendCount, ledger.ReasonSecretUndecryptable)
	}
	if !strings.Contains(review.StatusMessage, "sealed for another operation") || !strings.Contains(review.StatusMessage, "nothing was sent") {
		t.Errorf("status message %q does not say why, or that nothing was sent", review.StatusMessage)
	}
	if evs := events(t, ctx, h.Store, review, ledger.EventRequireReview); len(evs) != 1 || evs[0]["reason"] != ledger.ReasonSecretUndecryptable {
		t.Errorf("require_review events %v, want one with reason %s", evs, ledger.ReasonSecretUndecryptable)
	}
	if strings.Contains(review.StatusMessage, token) {
		t.Error("the status message shows the secret")
	}
	done := awaitOperation(t, ctx, h.Store, "op-own", ended)
	jobs := h.Sim.Jobs()
	if done.State != ledger.StateCompleted || len(jobs) != 1 || jobs[0].Token != token {
		t.Fatalf("the owner ended %s; provider jobs %+v; want one job, the owner's, with its token", done.State, jobs)
	}
}

// TestMissingSecretsKey: a tool declares secret arguments and no key is
// configured: the gateway refuses to start and says how to create one.
func TestMissingSecretsKey(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	_, err := fixtures.New(ctx, &fixtures.Options{Dir: t.TempDir(), Config: fixtures.ConfigOptions{SecretArguments: []string{"token"}}})
	if err == nil || !strings.Contains(err.Error(), "taskgate secrets-key create") || !strings.Contains(err.Error(), "hosted_test.run_suite") {
		t.Fatalf("start without a secrets key: %v; want a refusal naming the tool and taskgate secrets-key create", err)
	}
}
