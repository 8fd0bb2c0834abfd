package cli_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/receipt/receipttest"
	"github.com/taskgate/taskgate/secrets"
	"github.com/taskgate/taskgate/signingkeys"
)

// signedRun holds run ci-9: suite-1 and suite-2 completed, their receipts
// issued, and suite-open still open; and run ci-other's suite-other,
// issued too. It returns the configuration that opens the signing key.
func signedRun(t *testing.T) (*ledgerFile, string, string) {
	t.Helper()
	l := newLedger(t)
	at := time.Now().Add(-time.Hour)
	l.finished(t, "acme", "suite-1", "ci-9", at, "17.84", false)
	l.finished(t, "acme", "suite-2", "ci-9", at.Add(time.Minute), "17.84", false)
	l.finished(t, "acme", "suite-other", "ci-other", at.Add(2*time.Minute), "17.84", false)
	if _, err := l.store.Accept(context.Background(), &ledger.AcceptParams{
		Tenant: "acme", OperationID: "suite-open", Upstream: "hosted_test", Tool: "run_suite", Fingerprint: "sha256:1",
		RequestID: ledger.NewRequestID(), TaskID: ledger.NewTaskID(), Source: "test", RunID: "ci-9",
	}); err != nil {
		t.Fatal(err)
	}
	cfg, keyFile := signingConfig(t, l)
	l.ok(t, "signing-keys", "create", "--config", cfg)
	for _, op := range []string{"suite-1", "suite-2", "suite-other"} {
		l.ok(t, "receipt", "issue", op, "--config", cfg)
	}
	return l, cfg, keyFile
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// TestPacketReadsIssuedReceiptsWithoutAKey: with no secrets key at all, the
// packet includes each issued receipt by version and digest, and the open
// operation's provisional receipt, marked so; signing it needs the key.
func TestPacketReadsIssuedReceiptsWithoutAKey(t *testing.T) {
	l, _, _ := signedRun(t)
	r := l.run(t, "packet", "--run", "ci-9", "--format", "json")
	if r.code != 2 || r.stderr != provisionalNote(1, 3)+"review packet: not ready: 1 of 3 operations: suite-open (needs_review)\n" {
		t.Fatalf("packet with no secrets key: exit %d, stderr %q; want 2, suite-open provisional and not ready", r.code, r.stderr)
	}
	d := readPacket(t, []byte(r.stdout))
	for i, id := range []string{"suite-1", "suite-2"} {
		o := d.Packet.Operations[i]
		want := sha256Hex([]byte(l.ok(t, "receipt", id, "--format", "dsse")))
		if o.OperationID != id || o.Provisional || o.ReceiptVersion != 1 || o.ReceiptDigest != want || !strings.Contains(string(o.Receipt), `"issue"`) {
			t.Errorf("operation %d: %+v; want %s version 1, digest %s, with its issue block", i, o, id, want)
		}
	}
	if o := d.Packet.Operations[2]; o.OperationID != "suite-open" || !o.Provisional || o.ReceiptDigest != "" {
		t.Errorf("the open operation: %+v; want it provisional, named by no digest", o)
	}
	if v := d.Packet.Verification; v.IssuedReceipts != 2 || v.ProvisionalReceipts != 1 {
		t.Errorf("verification %+v; want 2 issued, 1 provisional", v)
	}

	checkFailure(t, l.run(t, "packet", "--run", "ci-9", "--format", "dsse"), "no secrets key is configured", true)
}

// TestSignedPacketVerifies: the signed packet, as an envelope or a bundle,
// verifies against the JWKS with its receipts given as files or read from
// the ledger; an edited listed digest, an edited figure, a swapped receipt,
// an edited receipt or a receipt left out fails, naming what changed.
func TestSignedPacketVerifies(t *testing.T) {
	l, cfg, keyFile := signedRun(t)
	dir := t.TempDir()
	if r := l.run(t, "packet", "--run", "ci-9", "--out", dir); r.code != 2 || !strings.Contains(r.stdout, "wrote "+filepath.Join(dir, "jwks.json")+"\n") {
		t.Fatalf("packet --out: exit %d, stdout %q; want the JWKS written beside the packet", r.code, r.stdout)
	}
	jwks := filepath.Join(dir, "jwks.json")
	signed := func(format string) string {
		r := l.run(t, "packet", "--run", "ci-9", "--format", format, "--config", cfg)
		if r.code != 2 {
			t.Fatalf("packet --format %s: exit %d, stderr %q; want the packet, not ready", format, r.code, r.stderr)
		}
		return writeFile(t, "packet."+format+".json", []byte(r.stdout))
	}
	env, bundle := signed("dsse"), signed("sigstore-bundle")
	r1 := writeFile(t, "suite-1.dsse.json", []byte(l.ok(t, "receipt", "suite-1", "--format", "dsse")))
	r2 := writeFile(t, "suite-2.dsse.json", []byte(l.ok(t, "receipt", "suite-2", "--format", "dsse")))
	other := writeFile(t, "suite-other.dsse.json", []byte(l.ok(t, "receipt", "suite-other", "--format", "dsse")))

	for _, args := range [][]string{
		{env, "--jwks", jwks, "--receipt", r1, "--receipt", r2},
		{bundle, "--jwks", jwks, "--receipt", r1, "--receipt", r2},
		{env, "--jwks", jwks},
		{env},
	} {
		out := l.ok(t, append([]string{"packet", "verify"}, args...)...)
		if !strings.Contains(out, "receipts:   2 issued, each the one listed") || !strings.Contains(out, "provisional: 1, not issued and not listed") {
			t.Errorf("packet verify %q printed\n%s\nwant both receipts as listed, one provisional", args, out)
		}
	}

	// A receipt of suite-2 version 1, validly signed, that is not the one
	// issued.
	ring, err := secrets.LoadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(r2)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := receipt.Issued(doc, "")
	if err != nil {
		t.Fatal(err)
	}
	forged.DuplicateJobs = 5
	st, err := receipt.Statement(forged, receipt.Issue{Version: 1})
	if err != nil {
		t.Fatal(err)
	}
	swapped, _, err := signingkeys.NewSigner(l.store, ring).Envelope(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	swappedFile := writeFile(t, "swapped.dsse.json", swapped)

	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"an edited listed digest", []string{editEnvelope(t, env, func(st map[string]any) {
			st["subject"].([]any)[0].(map[string]any)["digest"].(map[string]any)["sha256"] = sha256Hex(nil)
		}), "--receipt", r1, "--receipt", r2}, []string{
			"the signature does not match the review packet's statement", "subject[0].digest.sha256 differs from what was signed",
			`receipt "receipt/acme/suite-1/v1" is not the one the packet lists`,
		}},
		{"an edited packet", []string{editEnvelope(t, env, func(st map[string]any) {
			st["predicate"].(map[string]any)["review_packet"].(map[string]any)["summary"].(map[string]any)["final_cost_usd"] = "1.00"
		}), "--receipt", r1, "--receipt", r2}, []string{"summary.final_cost_usd differs from what was signed"}},
		{"a swapped receipt", []string{env, "--receipt", r1, "--receipt", swappedFile}, []string{
			`receipt "receipt/acme/suite-2/v1" is not the one the packet lists: its sha256 is ` + sha256Hex(swapped) + ", the packet lists " + sha256Hex(doc),
		}},
		{"another operation's receipt", []string{env, "--receipt", r1, "--receipt", other}, []string{
			`the packet lists receipt "receipt/acme/suite-2/v1"`, `receipt "receipt/acme/suite-other/v1" was given, and the packet does not list it`,
		}},
		{"an edited receipt", []string{env, "--receipt", r1, "--receipt", editEnvelope(t, r2, func(st map[string]any) {
			st["predicate"].(map[string]any)["paid_tool_retry_receipt"].(map[string]any)["final_cost_usd"] = "1.00"
		})}, []string{"the signature does not match the receipt's statement", "final_cost_usd differs from what was signed", `receipt "receipt/acme/suite-2/v1" is not the one the packet lists`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkUnverified(t, l.run(t, append([]string{"packet", "verify", "--jwks", jwks}, tc.args...)...), tc.want...)
		})
	}
}

// editEnvelope changes the statement in the DSSE envelope in file with
// edit, keeping its signature, and writes it to a new file.
func editEnvelope(t *testing.T, file string, edit func(st map[string]any)) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, "edited-"+filepath.Base(file), append(receipttest.EditStatement(t, b, edit), '\n'))
}
