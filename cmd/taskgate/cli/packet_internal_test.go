package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/sqlite/sqlitetest"
	"github.com/taskgate/taskgate/packet"
	"github.com/taskgate/taskgate/receipt"
)

// fakeSigner embeds each receipt as a JWS-shaped string.
type fakeSigner struct{}

func (fakeSigner) Form() string { return "jws" }

func (fakeSigner) Embed(r *receipt.Receipt) (json.RawMessage, error) {
	return json.Marshal("eyJhbGciOiJFZERTQSJ9." + r.OperationID + ".c2ln")
}

// TestPacketWritesTheJWKS: with a signer and a JWKS, --out embeds the
// signed receipts and writes the JWKS beside the packet, which names it;
// a JWKS that cannot be had makes no packet.
func TestPacketWritesTheJWKS(t *testing.T) {
	ctx := context.Background()
	s := sqlitetest.Open(t)
	if _, err := s.Accept(ctx, &ledger.AcceptParams{
		Tenant: "acme", OperationID: "suite-signed", Upstream: "hosted_test", Tool: "run_suite", Fingerprint: "sha256:1",
		RequestID: ledger.NewRequestID(), TaskID: ledger.NewTaskID(), Source: "test", RunID: "ci-4711",
	}); err != nil {
		t.Fatal(err)
	}
	const jwks = `{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"receipts-1","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`
	var stdout bytes.Buffer
	e := &env{stdout: &stdout, stderr: &stdout, db: "sqlite:test"}
	dir := t.TempDir()
	req := &packetRequest{
		sel: packet.Selection{RunID: "ci-4711"}, out: dir, now: time.Now(),
		signing: receiptSigning{embedder: fakeSigner{}, jwks: func(context.Context) ([]byte, error) { return []byte(jwks), nil }},
	}
	p, err := e.writePacket(ctx, s, req)
	if err != nil {
		t.Fatal(err)
	}
	if p.Verification != (packet.Verification{ReceiptForm: "jws", JWKS: "jwks.json"}) {
		t.Errorf("verification = %+v, want jws receipts verified by jwks.json", p.Verification)
	}
	got, err := os.ReadFile(filepath.Join(dir, "jwks.json"))
	if err != nil || string(got) != jwks {
		t.Errorf("jwks.json = %s, %v; want the JWKS as given", got, err)
	}
	js, err := os.ReadFile(filepath.Join(dir, "packet.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"receipt": "eyJhbGciOiJFZERTQSJ9.suite-signed.c2ln"`, `"receipt_form": "jws"`, `"jwks": "jwks.json"`} {
		if !strings.Contains(string(js), want) {
			t.Errorf("packet.json lacks %s:\n%s", want, js)
		}
	}
	if !strings.Contains(stdout.String(), "wrote "+filepath.Join(dir, "jwks.json")+"\n") || strings.Contains(stdout.String(), "wrote no") {
		t.Errorf("stdout = %q, want it to name the JWKS written", stdout.String())
	}

	unavailable := errors.New("the key store is locked")
	req.out = filepath.Join(t.TempDir(), "none")
	req.signing.jwks = func(context.Context) ([]byte, error) { return nil, unavailable }
	if _, err := e.writePacket(ctx, s, req); !errors.Is(err, unavailable) || !strings.Contains(err.Error(), "get the keys that verify the receipts") {
		t.Errorf("writePacket without its JWKS = %v; want the JWKS's error, saying what it was for", err)
	}
	if _, err := os.Stat(filepath.Join(req.out, "packet.md")); !os.IsNotExist(err) {
		t.Errorf("packet.md after a failed JWKS: %v; want none written", err)
	}
}
