package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/canon"
	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/daemon"
	"github.com/taskgate/taskgate/internal/syncbuf"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/sqlite"
	"github.com/taskgate/taskgate/secrets"
	"github.com/taskgate/taskgate/sim/fixtures"
)

// legacyLedger is a SQLite ledger holding one open operation whose secret
// token was written in plain text, as by a gateway without a key.
func legacyLedger(t *testing.T, token string) (path string, op *ledger.Operation) {
	t.Helper()
	ctx := context.Background()
	path = filepath.Join(t.TempDir(), "taskgate.db")
	s, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	args := json.RawMessage(`{"suite":"settlement","token":"` + token + `"}`)
	fp, err := canon.Compute("hosted_test", "run_suite", args)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Accept(ctx, &ledger.AcceptParams{
		Tenant: "acme", OperationID: "op-legacy", Upstream: "hosted_test", Tool: "run_suite", Fingerprint: string(fp),
		Arguments: args, RequestID: ledger.NewRequestID(), TaskID: ledger.NewTaskID(), Source: "test",
		RetryPolicy: ledger.RetryLookupThenAttach, SecretArguments: []string{"token"},
	})
	if err != nil || res.Operation.SecretsAtRest != ledger.SecretsPlaintext {
		t.Fatalf("accept without a key: %+v, %v", res, err)
	}
	// The operation waits for a human, so that the gateway started below
	// leaves it as it is.
	if _, err := s.Transition(ctx, &ledger.TransitionParams{OperationRef: res.Operation.ID, To: ledger.StateReview}); err != nil {
		t.Fatal(err)
	}
	return path, res.Operation
}

// secretStage is the configuration of a gateway on the ledger db whose
// run_suite declares a secret token.
func secretStage(t *testing.T, db string, o fixtures.ConfigOptions) (*config.Config, net.Listener) {
	t.Helper()
	o.SecretArguments = []string{"token"}
	return stageWith(t, db, o)
}

// TestStartSealsPlaintextSecrets: a gateway started with a key seals what
// operations of an older ledger kept in plain text, and says so.
func TestStartSealsPlaintextSecrets(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const token = "sk-live-legacy-5f1c"
	path, op := legacyLedger(t, token)
	keys := filepath.Join(t.TempDir(), "taskgate.keys")
	if _, err := secrets.CreateFile(keys); err != nil {
		t.Fatal(err)
	}
	ring, err := secrets.LoadFile(keys)
	if err != nil {
		t.Fatal(err)
	}
	cfg, ln := secretStage(t, "sqlite:"+path, fixtures.ConfigOptions{SecretsKeyFile: keys})
	var logs syncbuf.Buffer
	d, err := daemon.Start(ctx, &daemon.Options{Config: cfg, Listener: ln, Secrets: ring, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.Store.OperationGet(ctx, &ledger.OperationGetParams{ID: op.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got.SecretsAtRest != ledger.SecretsSealed || bytes.Contains(got.Arguments, []byte(token)) {
		t.Fatalf("after the start the operation keeps %s as %s", got.Arguments, got.SecretsAtRest)
	}
	if opened, err := ring.Open(got.Arguments, got.SecretArguments, got.SecretScope()); err != nil || !bytes.Contains(opened, []byte(token)) {
		t.Fatalf("the sealed arguments open as %s, %v", opened, err)
	}
	if !strings.Contains(logs.String(), "encrypted the secret arguments that operations kept in plain text") || !strings.Contains(logs.String(), "operations=1") {
		t.Errorf("logs:\n%s\nwant a line saying one operation's secrets were encrypted", logs.String())
	}
	if err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// The last connection's close checkpoints the WAL into the file.
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(token)) {
		t.Error("the ledger file still holds the plaintext after the gateway sealed it and stopped")
	}
}

// TestStartWarnsOfPlaintextSecrets: with secrets.store: plaintext the
// gateway starts, warns that the tools' secrets are kept unencrypted, and
// reports the operations that hold them so.
func TestStartWarnsOfPlaintextSecrets(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	path, _ := legacyLedger(t, "sk-live-legacy-77aa")
	cfg, ln := secretStage(t, "sqlite:"+path, fixtures.ConfigOptions{})
	cfg.Secrets.Store = config.SecretsPlaintext
	var logs syncbuf.Buffer
	d, err := daemon.Start(ctx, &daemon.Options{Config: cfg, Listener: ln, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop(context.WithoutCancel(ctx))
	for _, want := range []string{"secrets.store is plaintext", "hosted_test.run_suite", "operations keep secret arguments in plain text", "operations=1"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs:\n%s\nwant %q", logs.String(), want)
		}
	}
}
