package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/cmd/taskgate/cli"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/sqlite"
)

// TestDemo runs the whole demo, keeping its ledger, and checks the exit
// status, the figures it printed and the attempt lineage the ledger holds.
func TestDemo(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := cli.Main(ctx, []string{"demo", "--keep", dir}, &stdout, &stderr, func(string) string { return "" })
	out := stdout.String()
	if code != 0 {
		t.Fatalf("taskgate demo: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr.String())
	}
	for _, want := range []string{
		// The receipt.
		"observed_remote_jobs: 1\n",
		"duplicate_jobs: 0\n",
		"final_cost_usd: 17.84\n",
		"reconciliation_status: complete\n",
		"review_status: ready\n",
		// The denied retry under a new operation ID.
		"retry_uses_new_operation_id → deny_retry",
		// The control's provider record.
		"hosted-suite-9913  succeeded",
		"total: 2 jobs",
		"35.68 USD final",
		// How to inspect what was kept.
		"taskgate --db sqlite:" + filepath.Join(dir, "taskgate.db") + " ops show settlement-regression-842",
		// The review packet, and the receipt verified from the files alone.
		"packet    run taskgate-demo: 1 operation(s), verdict ready",
		"verified  receipt.dsse.json as the gateway issued it, and packet.dsse.json, which lists it by digest, against jwks.json alone",
		"taskgate receipt verify " + filepath.Join(dir, "review", "receipt.dsse.json"),
		"taskgate packet verify " + filepath.Join(dir, "review", "packet.dsse.json"),
		"PASS:",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, out)
		}
	}

	// What the demo wrote verifies offline with the command it printed,
	// and an edited copy does not.
	review := filepath.Join(dir, "review")
	var vout, verr bytes.Buffer
	verify := []string{"receipt", "verify", filepath.Join(review, "receipt.dsse.json"), "--jwks", filepath.Join(review, "jwks.json")}
	if code := cli.Main(ctx, verify, &vout, &verr, func(string) string { return "" }); code != 0 {
		t.Errorf("taskgate %s: exit %d, %s%s", strings.Join(verify, " "), code, vout.String(), verr.String())
	}
	edited := editEnvelope(t, filepath.Join(review, "receipt.dsse.json"), func(st map[string]any) {
		b, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		b = bytes.Replace(b, []byte(`"final_cost_usd":"17.84"`), []byte(`"final_cost_usd":"1.00"`), 1)
		clear(st)
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
	})
	verr.Reset()
	if code := cli.Main(ctx, []string{"receipt", "verify", edited, "--jwks", filepath.Join(review, "jwks.json")}, &vout, &verr, func(string) string { return "" }); code != 1 || !strings.Contains(verr.String(), "final_cost_usd") {
		t.Errorf("verify of an edited receipt: exit %d, stderr %q; want 1 naming final_cost_usd", code, verr.String())
	}
	for _, f := range []string{"packet.md", "packet.json", "jwks.json", "packet.dsse.json"} {
		if _, err := os.Stat(filepath.Join(review, f)); err != nil {
			t.Errorf("the demo did not write %s: %v", f, err)
		}
	}

	s, err := sqlite.Open(ctx, filepath.Join(dir, "taskgate.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	op, err := s.OperationGet(ctx, &ledger.OperationGetParams{Tenant: "acme", OperationID: "settlement-regression-842"})
	if err != nil {
		t.Fatal(err)
	}
	atts, err := s.AttemptList(ctx, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	type line struct {
		operationID string
		decision    ledger.Decision
		reason      string
		client      ledger.ClientResult
	}
	want := []line{
		{"settlement-regression-842", ledger.DecisionCreated, "", ledger.ClientDisconnected},
		{"settlement-regression-842", ledger.DecisionAttached, "", ledger.ClientDelivered},
		{"settlement-regression-842-retry", ledger.DecisionDenied, ledger.ReasonRetryUsesNewOperation, ledger.ClientDelivered},
	}
	if len(atts) != len(want) {
		t.Fatalf("lineage has %d attempts, want %d: %+v", len(atts), len(want), atts)
	}
	for i, a := range atts {
		got := line{a.OperationID, a.Decision, a.Reason, a.ClientResult}
		if got != want[i] {
			t.Errorf("attempt %d = %+v, want %+v", i, got, want[i])
		}
	}
	jobs, err := s.RemoteJobList(ctx, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].RemoteJobID != "hosted-suite-9912" || jobs[0].Status != ledger.JobCompleted {
		t.Errorf("remote jobs = %+v, want hosted-suite-9912 completed alone", jobs)
	}

	// A kept directory is never reused: the next run would find the old
	// operation and tell a different story.
	stdout.Reset()
	stderr.Reset()
	code = cli.Main(ctx, []string{"demo", "--keep", dir}, &stdout, &stderr, func(string) string { return "" })
	if code != 1 || !strings.Contains(stderr.String(), "is not empty") {
		t.Errorf("demo --keep into a used directory: exit %d, stderr %q; want exit 1 naming the ledger", code, stderr.String())
	}
}
