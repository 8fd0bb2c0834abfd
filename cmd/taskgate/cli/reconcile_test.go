package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/cmd/taskgate/cli"
	"github.com/taskgate/taskgate/ledger"
)

// gatewayConfig writes a configuration whose database is l's ledger and
// whose upstream hosted_test has the given tools, and returns its path.
// Nothing listens at the upstream's URL: reconciling an operation that
// was never sent asks the provider nothing.
func (l *ledgerFile) gatewayConfig(t *testing.T, tools string) string {
	t.Helper()
	y := fmt.Sprintf("database: %s\nupstreams:\n  - name: hosted_test\n    url: http://127.0.0.1:1/mcp\n    required: false\n    tools:\n%s", l.db, tools)
	path := filepath.Join(t.TempDir(), "taskgate.yaml")
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const runSuite = "      run_suite:\n        consequential: true\n        retry_policy: no_automatic_resend\n"

// reconcile runs taskgate reconcile without --db, as an operator would
// with the gateway's configuration.
func reconcile(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := cli.Main(ctx, append([]string{"reconcile"}, args...), &stdout, &stderr, func(string) string { return "" })
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func reconciledEvents(t *testing.T, l *ledgerFile, op *ledger.Operation) int {
	t.Helper()
	evs, err := l.store.EventList(context.Background(), op.ID)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range evs {
		if ev.Kind == ledger.EventReconciled {
			n++
		}
	}
	return n
}

// Without an ID, reconcile takes every operation that has not ended and
// every ended one whose receipt is not reconciled, however many operations
// come after them, from the configuration's database.
func TestReconcileOpenOperations(t *testing.T) {
	l := newLedger(t)
	old := l.accept(t, "acme", "op-old-unsent", false)
	review := l.inReview(t, "op-review")
	var done []*ledger.Operation
	for i := range 205 {
		done = append(done, l.completed(t, "acme", fmt.Sprintf("op-done-%03d", i)))
	}
	other := l.accept(t, "globex", "op-globex", false)
	cfg := l.gatewayConfig(t, runSuite)

	r := reconcile(t, "--config", cfg, "--tenant", "acme")
	if r.code != 0 {
		t.Fatalf("reconcile: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		id, _, _ := strings.Cut(line, "\t")
		got = append(got, id)
	}
	if want := "op-review op-old-unsent"; strings.Join(got, " ") != want {
		t.Errorf("reconcile reconciled %v, want %s; stdout:\n%s", got, want, r.stdout)
	}
	for _, op := range []*ledger.Operation{old, review} {
		if n := reconciledEvents(t, l, op); n != 1 {
			t.Errorf("%s has %d reconciled events, want 1", op.OperationID, n)
		}
	}
	for _, op := range []*ledger.Operation{done[0], done[204], other} {
		if n := reconciledEvents(t, l, op); n != 0 {
			t.Errorf("%s has %d reconciled events, want none", op.OperationID, n)
		}
	}
}

// A configuration without the operation's tool cannot reconcile it: the
// command says so, names the tool, and records nothing.
func TestReconcileNeedsTheGatewaysConfiguration(t *testing.T) {
	l := newLedger(t)
	op := l.accept(t, "acme", "op-1", false)
	cfg := l.gatewayConfig(t, "      other_tool:\n        consequential: true\n")

	for _, args := range [][]string{{"op-1", "--config", cfg}, {"--config", cfg}} {
		r := reconcile(t, args...)
		checkFailure(t, r, "has no consequential tool hosted_test.run_suite, which the operations to reconcile ran; pass the gateway's own configuration", true)
	}
	if n := reconciledEvents(t, l, op); n != 0 {
		t.Errorf("op-1 has %d reconciled events after refused reconciliations, want none", n)
	}

	r := reconcile(t, "op-1", "--config", l.gatewayConfig(t, runSuite))
	if r.code != 0 || !strings.HasPrefix(r.stdout, "op-1\tacme\tjobs 0\t") {
		t.Errorf("reconcile op-1: exit %d, stdout %q, stderr %q; want op-1's figures", r.code, r.stdout, r.stderr)
	}
	if n := reconciledEvents(t, l, op); n != 1 {
		t.Errorf("op-1 has %d reconciled events, want 1", n)
	}
}

func TestReconcileInvalidConfiguration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "taskgate.yaml")
	if err := os.WriteFile(path, []byte("listen: 127.0.0.1:8931\nwait: 30\nworker:\n  lisen: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := reconcile(t, "--config", path)
	want := "Error: invalid configuration:\n" +
		"  " + path + ":2: wait: 30 is not a duration; write 30s\n" +
		"  " + path + ":4: worker.lisen: unknown field (known: lease, sweep, upstream_poll, reconcile, fetch_poll, workers, job_retention)\n"
	if r.code != 1 || r.stderr != want {
		t.Errorf("reconcile with an invalid configuration: exit %d, stderr\n%s\nwant exit 1 and\n%s", r.code, r.stderr, want)
	}
}

// A configuration that uses a deprecated field name still loads, and the
// command warns on stderr, naming the field, its line and its new name.
func TestReconcileWarnsOfDeprecatedFields(t *testing.T) {
	l := newLedger(t)
	l.accept(t, "acme", "op-1", false)
	cfg := l.gatewayConfig(t, runSuite+"        contract:\n          job_id_field: job_id\n")

	r := reconcile(t, "op-1", "--config", cfg)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "op-1\tacme\tjobs 0\t") {
		t.Fatalf("reconcile op-1: exit %d, stdout %q, stderr %q; want op-1's figures", r.code, r.stdout, r.stderr)
	}
	want := cfg + ":11: upstreams[0].tools.run_suite.contract.job_id_field: is deprecated and will be removed in the next release; rename it to remote_job_id_field"
	if !strings.Contains(r.stderr, "level=WARN") || !strings.Contains(r.stderr, want) {
		t.Errorf("stderr = %q, want a warning containing %q", r.stderr, want)
	}
}
