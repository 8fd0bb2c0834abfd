package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/canon"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
)

// finished puts in the ledger a completed operation of tenant whose
// accepting attempt carried run: accepted at under an approval of 20.00
// that dana gave, one remote job charged charge. With duplicate, the
// provider started a second job, which was cancelled before any charge.
func (l *ledgerFile) finished(t *testing.T, tenant, operationID, run string, at time.Time, charge string, duplicate bool) *ledger.Operation {
	t.Helper()
	ctx := context.Background()
	if _, err := l.store.ApprovalCreate(ctx, &ledger.Approval{
		Tenant: tenant, OperationID: operationID, Tool: "hosted_test.run_suite", MaxTotalCost: money.MustParse("20.00", "USD"),
		MaxRemoteJobs: 1, RetryPolicy: ledger.RetryLookupThenAttach, ExpiresAt: time.Now().Add(time.Hour), CreatedBy: "dana",
	}); err != nil {
		t.Fatal(err)
	}
	args := json.RawMessage(`{"suite":"settlement"}`)
	fp, err := canon.Compute("hosted_test", "run_suite", args)
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.store.Accept(ctx, &ledger.AcceptParams{
		Tenant: tenant, OperationID: operationID, Upstream: "hosted_test", Tool: "run_suite", Fingerprint: string(fp),
		Arguments: args, RequestID: ledger.NewRequestID(), TaskID: ledger.NewTaskID(), Source: "test", RunID: run,
		RetryPolicy: ledger.RetryLookupThenAttach, Priced: true, Now: at,
		Approval: ledger.ApprovalRequirement{Required: true, Estimate: money.MustParse("18.00", "USD")},
	})
	if err != nil || res.Decision != ledger.DecisionCreated {
		t.Fatalf("Accept(%s) = %v, %v; want created", operationID, res, err)
	}
	op := l.sending(t, res.Operation)
	amount := money.MustParse(charge, "USD")
	job := operationID + "-job-1"
	jobs := []*ledger.RemoteJobUpsert{{Upstream: "hosted_test", RemoteJobID: job, Kind: ledger.JobKindProviderJob, Status: ledger.JobCompleted, Intended: new(true)}}
	events := []ledger.EventParams{
		{Kind: ledger.EventRemoteJobBound, Data: map[string]string{"remote_job_id": job}},
		{Kind: ledger.EventResultStored, Data: map[string]string{"remote_job_id": job}},
	}
	if duplicate {
		jobs = append(jobs, &ledger.RemoteJobUpsert{
			Upstream: "hosted_test", RemoteJobID: operationID + "-job-2", Kind: ledger.JobKindProviderJob, Status: ledger.JobCancelled,
			Duplicate: new(true), DuplicateResolved: "cancelled", CancelRequested: true, EffectReversed: ledger.Yes,
		})
		events = append(events, ledger.EventParams{Kind: ledger.EventDuplicateJob, Data: map[string]string{"remote_job_id": operationID + "-job-2"}})
	}
	if _, err := l.store.Transition(ctx, &ledger.TransitionParams{
		OperationRef: op.ID, From: []ledger.State{ledger.StateSending}, To: ledger.StateCompleted,
		Result:      json.RawMessage(`{"content":[{"type":"text","text":"suite passed"}]}`),
		RemoteJobs:  jobs,
		Charges:     []*ledger.ChargeUpsert{{RemoteJobID: job, ProviderChargeID: operationID + "-charge-1", Amount: amount, Status: ledger.ChargeFinal, Source: "test"}},
		Creator:     &ledger.AttemptKnowledge{RemoteAccepted: ledger.Yes, RemoteEffect: ledger.Yes, ChargeStatus: ledger.Yes},
		Reservation: &ledger.ReservationUpdate{Status: ledger.ReservationSettled, Settled: amount},
		Events:      events,
	}); err != nil {
		t.Fatal(err)
	}
	return l.operation(t, op)
}

// provisionalNote is what packet says on stderr when n of its receipts
// are provisional.
func provisionalNote(n, of int) string {
	return fmt.Sprintf("%d of %d receipts are provisional: their operations are still open, or no signing key could sign them when they were final (taskgate receipt issue).\n", n, of)
}

// packetDoc is what the tests read of a JSON review packet.
type packetDoc struct {
	Packet struct {
		Verdict struct {
			Status   string `json:"status"`
			NotReady []struct {
				OperationID string `json:"operation_id"`
			} `json:"not_ready"`
		} `json:"verdict"`
		Summary struct {
			FinalCostUSD string `json:"final_cost_usd"`
		} `json:"summary"`
		Operations []struct {
			OperationID    string          `json:"operation_id"`
			ReceiptVersion int             `json:"receipt_version"`
			ReceiptDigest  string          `json:"receipt_digest"`
			Provisional    bool            `json:"provisional"`
			Receipt        json.RawMessage `json:"receipt"`
		} `json:"operations"`
		Verification struct {
			IssuedReceipts      int    `json:"issued_receipts"`
			ProvisionalReceipts int    `json:"provisional_receipts"`
			JWKS                string `json:"jwks"`
		} `json:"verification"`
	} `json:"review_packet"`
}

func readPacket(t *testing.T, b []byte) packetDoc {
	t.Helper()
	var d packetDoc
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("review packet JSON %s: %v", b, err)
	}
	return d
}

func (d packetDoc) operationIDs() []string {
	var ids []string
	for _, o := range d.Packet.Operations {
		ids = append(ids, o.OperationID)
	}
	return ids
}

// packetLedger holds run ci-4711 of acme — a clean operation, one whose
// duplicate job was cancelled and one that broke its cost boundary, ten
// minutes apart from t0 — and run ci-other's clean operation after them.
func packetLedger(t *testing.T) (*ledgerFile, time.Time) {
	l := newLedger(t)
	t0 := time.Now().Add(-3 * time.Hour).UTC().Truncate(time.Second)
	l.finished(t, "acme", "suite-clean", "ci-4711", t0, "17.84", false)
	l.finished(t, "acme", "suite-duplicate", "ci-4711", t0.Add(10*time.Minute), "17.84", true)
	l.finished(t, "acme", "suite-breach", "ci-4711", t0.Add(20*time.Minute), "23.10", false)
	l.finished(t, "acme", "suite-other", "ci-other", t0.Add(30*time.Minute), "17.84", false)
	return l, t0
}

// TestPacketVerdictSetsTheExitStatus: a run with an operation that is not
// ready renders its packet and exits 2, saying which on stderr; a ready
// run exits 0.
func TestPacketVerdictSetsTheExitStatus(t *testing.T) {
	l, _ := packetLedger(t)

	r := l.run(t, "packet", "--run", "ci-4711", "--format", "json")
	if r.code != 2 {
		t.Fatalf("packet of ci-4711: exit %d, stderr %q; want 2", r.code, r.stderr)
	}
	if want := provisionalNote(3, 3) + "review packet: not ready: 1 of 3 operations: suite-breach (needs_review)\n"; r.stderr != want {
		t.Errorf("stderr = %q, want %q", r.stderr, want)
	}
	d := readPacket(t, []byte(r.stdout))
	if got := d.operationIDs(); !slices.Equal(got, []string{"suite-clean", "suite-duplicate", "suite-breach"}) {
		t.Errorf("operations = %v, want the run's three, oldest first", got)
	}
	if d.Packet.Verdict.Status != "not_ready" || len(d.Packet.Verdict.NotReady) != 1 || d.Packet.Verdict.NotReady[0].OperationID != "suite-breach" ||
		d.Packet.Summary.FinalCostUSD != "58.78" {
		t.Errorf("verdict %+v, final %s; want not_ready for suite-breach and 58.78", d.Packet.Verdict, d.Packet.Summary.FinalCostUSD)
	}
	if d.Packet.Verification.ProvisionalReceipts != 3 || !d.Packet.Operations[0].Provisional || !strings.Contains(string(d.Packet.Operations[0].Receipt), `"paid_tool_retry_receipt"`) {
		t.Errorf("receipts %+v: %s; want the provisional JSON documents, none being issued", d.Packet.Verification, d.Packet.Operations[0].Receipt)
	}

	md := l.run(t, "packet", "--run", "ci-4711")
	if md.code != 2 || !strings.HasPrefix(md.stdout, "## Review packet: not ready\n\n**Not ready.** 1 of 3 operations is not ready for review.\n") {
		t.Errorf("packet --run ci-4711 (md): exit %d, stdout starts %q", md.code, firstLine(md.stdout))
	}
	if !strings.Contains(md.stdout, "| #2 | `acme` | `suite-duplicate` |") || !strings.Contains(md.stdout, "| `dana` | `suite-duplicate` |") {
		t.Errorf("the Markdown packet does not list approval #2, given by dana for suite-duplicate:\n%s", md.stdout)
	}

	ready := l.run(t, "packet", "--run", "ci-other", "--format", "json")
	if ready.code != 0 || ready.stderr != provisionalNote(1, 1) || readPacket(t, []byte(ready.stdout)).Packet.Verdict.Status != "ready" {
		t.Errorf("packet of ci-other: exit %d, stderr %q, stdout %s; want a ready packet and exit 0", ready.code, ready.stderr, ready.stdout)
	}
}

// TestPacketSelection: by operation IDs, tenant and acceptance time, alone
// and with a run; a relative --since counts back from now.
func TestPacketSelection(t *testing.T) {
	l, t0 := packetLedger(t)
	stamp := func(d time.Duration) string { return t0.Add(d).Format(time.RFC3339) }
	for _, tc := range []struct {
		args []string
		want []string
		code int
	}{
		{[]string{"suite-clean", "suite-duplicate"}, []string{"suite-clean", "suite-duplicate"}, 0},
		{[]string{"suite-breach", "--tenant", "acme"}, []string{"suite-breach"}, 2},
		{[]string{"--tenant", "acme"}, []string{"suite-clean", "suite-duplicate", "suite-breach", "suite-other"}, 2},
		{[]string{"--since", stamp(10 * time.Minute), "--until", stamp(30 * time.Minute)}, []string{"suite-duplicate", "suite-breach"}, 2},
		{[]string{"--until", stamp(10 * time.Minute)}, []string{"suite-clean"}, 0},
		{[]string{"--run", "ci-4711", "--since", stamp(5 * time.Minute)}, []string{"suite-duplicate", "suite-breach"}, 2},
		{[]string{"--run", "ci-4711", "--since", "4h"}, []string{"suite-clean", "suite-duplicate", "suite-breach"}, 2},
		{[]string{"--run", "ci-4711", "suite-duplicate"}, []string{"suite-duplicate"}, 0},
	} {
		r := l.run(t, append([]string{"packet", "--format", "json"}, tc.args...)...)
		if r.code != tc.code {
			t.Errorf("packet %s: exit %d (stderr %q), want %d", strings.Join(tc.args, " "), r.code, r.stderr, tc.code)
			continue
		}
		if got := readPacket(t, []byte(r.stdout)).operationIDs(); !slices.Equal(got, tc.want) {
			t.Errorf("packet %s selected %v, want %v", strings.Join(tc.args, " "), got, tc.want)
		}
	}

	checkFailure(t, l.run(t, "packet", "--run", "ci-4711", "--since", "1h"),
		`match run "ci-4711", accepted since`, false)
	checkFailure(t, l.run(t, "packet", "--run", "ci-none"),
		`no operations in ledger `+l.db+` match run "ci-none"; check the selection, or pass --allow-empty to render an empty packet`, false)
	checkFailure(t, l.run(t, "packet", "--run", "ci-4711", "suite-other", "suite-missing"),
		`no operation "suite-other", "suite-missing" matches run "ci-4711"; name only operations of the selection`, false)
	checkFailure(t, l.run(t, "packet", "suite-clean", "suite-missing"), `no operation "suite-missing" in the ledger; check the operation IDs`, false)

	empty := l.run(t, "packet", "--run", "ci-none", "--allow-empty")
	if empty.code != 0 || !strings.Contains(empty.stdout, "No operations were selected") {
		t.Errorf("packet --allow-empty of an empty run: exit %d, stdout %q; want an empty ready packet", empty.code, empty.stdout)
	}
}

// TestPacketOut: --out writes the Markdown and JSON packets, says that no
// JWKS accompanies them when the ledger has no signing key, and exits as
// the verdict says.
func TestPacketOut(t *testing.T) {
	l, _ := packetLedger(t)
	dir := filepath.Join(t.TempDir(), "review")
	r := l.run(t, "packet", "--run", "ci-4711", "--out", dir)
	if r.code != 2 {
		t.Fatalf("packet --out: exit %d, stderr %q; want 2", r.code, r.stderr)
	}
	want := "wrote " + filepath.Join(dir, "packet.md") + "\nwrote " + filepath.Join(dir, "packet.json") +
		"\nwrote no jwks.json: the ledger has no signing keys, so no receipt was issued\nverdict: not_ready (2 of 3 operations ready)\n"
	if r.stdout != want {
		t.Errorf("stdout = %q, want %q", r.stdout, want)
	}
	md, err := os.ReadFile(filepath.Join(dir, "packet.md"))
	if err != nil || !strings.HasPrefix(string(md), "## Review packet: not ready\n") {
		t.Errorf("packet.md = %.60q, %v; want the Markdown packet", md, err)
	}
	js, err := os.ReadFile(filepath.Join(dir, "packet.json"))
	if err != nil {
		t.Fatal(err)
	}
	if d := readPacket(t, js); d.Packet.Verdict.Status != "not_ready" || d.Packet.Verification.JWKS != "" || len(d.Packet.Operations) != 3 {
		t.Errorf("packet.json: %+v; want the run's three operations, not ready, naming no JWKS", d.Packet)
	}
	if _, err := os.Stat(filepath.Join(dir, "jwks.json")); !os.IsNotExist(err) {
		t.Errorf("jwks.json: %v; want none without signing keys", err)
	}
}

func TestPacketUsageErrors(t *testing.T) {
	l, _ := packetLedger(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "say which operations the packet covers: --run, --session, --tenant, --since, --until or operation IDs"},
		{[]string{"--run", " "}, "--run is empty"},
		{[]string{"--run", "ci-4711", "--format", "yaml"}, `--format "yaml" is not a review packet format; use md, json, dsse or sigstore-bundle`},
		{[]string{"--run", "ci-4711", "--format", "md", "--out", t.TempDir()}, "--out writes both formats; drop --format"},
		{[]string{"--since", "yesterday"}, `--since "yesterday" is neither an RFC 3339 time (2026-05-04T10:00:00Z) nor a duration ago (24h)`},
		{[]string{"--until", "-2h"}, `--until "-2h" is neither an RFC 3339 time`},
		{[]string{"--since", "2h", "--until", "3h"}, "is not before --until"},
	} {
		checkFailure(t, l.run(t, append([]string{"packet"}, tc.args...)...), tc.want, true)
	}
}
