package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taskgate/taskgate/canon"
	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/sqlite"
	"github.com/taskgate/taskgate/secrets"
)

func TestSecretsKeyCreate(t *testing.T) {
	l := newLedger(t)
	path := filepath.Join(t.TempDir(), "taskgate.keys")
	out := l.ok(t, "secrets-key", "create", "--file", path)
	ring, err := secrets.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "created key " + ring.Newest() + " in " + path + "\n"; out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	checkFailure(t, l.run(t, "secrets-key", "create", "--file", path), "exists and is not overwritten", false)
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Fatal("a refused create changed the key file")
	}

	l.ok(t, "secrets-key", "create", "--file", path, "--add")
	rotated, err := secrets.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if ids := rotated.KeyIDs(); len(ids) != 2 || ids[0] != ring.Newest() {
		t.Fatalf("after --add the keys are %v, want the first then a newer one", ids)
	}
	checkFailure(t, l.run(t, "secrets-key", "create"), "--file or --config is required", true)
}

// writeSecretConfig writes a configuration for l's ledger whose run_suite
// declares a secret token, with secrets given by extra.
func writeSecretConfig(t *testing.T, l *ledgerFile, extra string) string {
	t.Helper()
	y := "database: " + l.db + "\nlisten: 127.0.0.1:0\n" + extra + `
upstreams:
  - name: hosted_test
    url: http://127.0.0.1:1/mcp
    tools:
      run_suite:
        consequential: true
        secret_arguments: [token]
`
	path := filepath.Join(t.TempDir(), "taskgate.yaml")
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestServeWithoutSecretsKey(t *testing.T) {
	l := newLedger(t)
	r := l.run(t, "serve", "--config", writeSecretConfig(t, l, ""))
	checkFailure(t, r, "taskgate secrets-key create", false)
	if !strings.Contains(r.stderr, "hosted_test.run_suite") || !strings.Contains(r.stderr, "secrets.store: plaintext") {
		t.Errorf("stderr %q, want the tool named and the plaintext alternative", r.stderr)
	}
}

func TestSecretsKeyRotate(t *testing.T) {
	l := newLedger(t)
	ctx := context.Background()
	keys := filepath.Join(t.TempDir(), "taskgate.keys")
	l.ok(t, "secrets-key", "create", "--file", keys)
	old, err := secrets.LoadFile(keys)
	if err != nil {
		t.Fatal(err)
	}
	// An operation accepted by a gateway with the first key.
	path := strings.TrimPrefix(l.db, "sqlite:")
	s, err := sqlite.Open(ctx, path, &sqlite.Options{Secrets: old})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	args := json.RawMessage(`{"suite":"settlement","token":"sk-live-rotate"}`)
	fp, err := canon.Compute("hosted_test", "run_suite", args)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Accept(ctx, &ledger.AcceptParams{
		Tenant: "acme", OperationID: "op-rotate", Upstream: "hosted_test", Tool: "run_suite", Fingerprint: string(fp),
		Arguments: args, RequestID: ledger.NewRequestID(), TaskID: ledger.NewTaskID(), Source: "test",
		RetryPolicy: ledger.RetryLookupThenAttach, SecretArguments: []string{"token"},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := writeSecretConfig(t, l, "secrets:\n  key_file: "+keys+"\n")

	l.ok(t, "secrets-key", "create", "--config", cfg, "--add")
	newer, err := secrets.LoadFile(keys)
	if err != nil {
		t.Fatal(err)
	}
	out := l.ok(t, "secrets-key", "rotate", "--config", cfg)
	if !strings.Contains(out, "re-encrypted the secret arguments of 1 operation(s) under key "+newer.Newest()) ||
		!strings.Contains(out, "key "+newer.Newest()+": 1 operation(s)") || strings.Contains(out, old.Newest()) {
		t.Fatalf("rotate printed:\n%s\nwant one operation re-encrypted, none left under %s", out, old.Newest())
	}
	op := l.operation(t, res.Operation)
	onlyNewest, err := secrets.ParseRing([]byte(lastLine(t, keys)), "newest")
	if err != nil {
		t.Fatal(err)
	}
	opened, err := onlyNewest.Open(op.Arguments, op.SecretArguments, op.SecretScope())
	if err != nil || !strings.Contains(string(opened), "sk-live-rotate") {
		t.Fatalf("after rotate the newest key alone opens %s, %v", opened, err)
	}
	if strings.Contains(out, "sk-live-rotate") {
		t.Error("rotate printed the secret")
	}

	// With a key that opens nothing, rotate says so and exits 1.
	other := filepath.Join(t.TempDir(), "other.keys")
	l.ok(t, "secrets-key", "create", "--file", other)
	r := l.run(t, "secrets-key", "rotate", "--config", writeSecretConfig(t, l, "secrets:\n  key_file: "+other+"\n"))
	if r.code != 1 || !strings.Contains(r.stderr, "could not be decrypted") {
		t.Fatalf("rotate with an unrelated key: exit %d, stderr %q; want exit 1 saying what could not be decrypted", r.code, r.stderr)
	}
}

// lastLine is the last non-empty line of a file.
func lastLine(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// TestSecretsKeySeal: a value sealed for an upstream, tenant and header
// opens, with the key file, for that header of that tenant only, and never
// appears in the command's output.
func TestSecretsKeySeal(t *testing.T) {
	l := newLedger(t)
	path := filepath.Join(t.TempDir(), "taskgate.keys")
	l.ok(t, "secrets-key", "create", "--file", path)
	const value = "Bearer acme-credential-11f0"
	r := l.runEnv(t, map[string]string{"ACME_TOKEN": value},
		"secrets-key", "seal", "--file", path, "--upstream", "hosted_test", "--tenant", "acme", "--header", "Authorization", "--from-env", "ACME_TOKEN")
	if r.code != 0 {
		t.Fatalf("seal: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, "acme-credential") {
		t.Fatalf("seal printed the value: %q %q", r.stdout, r.stderr)
	}
	sealed := strings.TrimSpace(r.stdout)
	y := "upstreams:\n  - name: hosted_test\n    url: http://127.0.0.1:1/mcp\n    tenant_headers:\n" +
		"      acme: {authorization: {sealed: " + sealed + "}}\n      globex: {Authorization: {sealed: " + sealed + "}}\n"
	cfg, err := config.Parse(strings.NewReader(y), "t.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	ring, err := secrets.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	err = cfg.OpenTenantHeaders(ring.OpenBytes)
	if err == nil || !strings.Contains(err.Error(), "upstreams[0].tenant_headers.globex.Authorization.sealed: does not open") || strings.Contains(err.Error(), "tenant_headers.acme") {
		t.Fatalf("OpenTenantHeaders = %v; want acme's to open and the copy under globex to be refused", err)
	}
	if got, _ := cfg.Upstreams[0].ForTenant("acme"); got.Headers["authorization"] != value {
		t.Errorf("acme's header opened to %q, want the sealed value", got.Headers["authorization"])
	}
	checkFailure(t, l.run(t, "secrets-key", "seal", "--file", path, "--tenant", "acme"), "--upstream, --tenant and --header are required", true)
}
