package packet_test

import (
	"context"
	"crypto/ed25519"
	"slices"
	"strings"
	"testing"

	"github.com/taskgate/taskgate/packet"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/receipt/receipttest"
)

// signingKey is a fixed Ed25519 key, so that its signatures are too.
var signingKey = ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))

func keyID(t *testing.T) string {
	t.Helper()
	kid, err := receipt.KeyID(signingKey.Public())
	if err != nil {
		t.Fatal(err)
	}
	return kid
}

// issued includes in's receipt as version 1, issued and signed as the
// gateway issues it.
func issued(t *testing.T, in *receipt.Input) packet.Included {
	t.Helper()
	in.Operation.ChainHead = strings.Repeat("ab", 32)
	st, err := receipt.Statement(receipt.Build(in), receipt.Issue{Version: 1})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := receipt.Envelope(context.Background(), st, signingKey, keyID(t))
	if err != nil {
		t.Fatal(err)
	}
	r, err := receipt.Issued(doc, keyID(t))
	if err != nil {
		t.Fatal(err)
	}
	return packet.Included{Receipt: r, Document: doc, Approval: in.Approval}
}

// signedPacket is a packet of two issued receipts and a provisional one,
// its envelope signed with signingKey, and the issued receipts' envelopes.
func signedPacket(t *testing.T) (*packet.Packet, []byte, [][]byte) {
	t.Helper()
	a, b := issued(t, clean()), issued(t, costBreach())
	p, err := packet.Build(&packet.Input{Selection: packet.Selection{RunID: run}, Operations: append([]packet.Included{a, b}, provisional(duplicateCancelled())...), JWKS: "jwks.json"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := packet.Statement(p)
	if err != nil {
		t.Fatal(err)
	}
	env, err := receipt.Envelope(context.Background(), st, signingKey, keyID(t))
	if err != nil {
		t.Fatal(err)
	}
	return p, env, [][]byte{a.Document, b.Document}
}

// TestIssuedReceiptsInThePacket: an issued receipt is named by its version
// and the digest of its stored envelope, a provisional one is marked, and
// the signed packet lists exactly the issued ones.
func TestIssuedReceiptsInThePacket(t *testing.T) {
	p, env, docs := signedPacket(t)
	if v := p.Verification; v.IssuedReceipts != 2 || v.ProvisionalReceipts != 1 {
		t.Errorf("verification = %+v, want 2 issued and 1 provisional", v)
	}
	for i, o := range p.Operations[:2] {
		if o.Provisional || o.ReceiptVersion != 1 || o.ReceiptDigest != receipt.Digest(docs[i]) {
			t.Errorf("operation %s: provisional %v, version %d, digest %s; want version 1 named by its envelope's digest", o.OperationID, o.Provisional, o.ReceiptVersion, o.ReceiptDigest)
		}
	}
	if o := p.Operations[2]; !o.Provisional || o.ReceiptDigest != "" || !strings.Contains(string(o.Receipt), `"provisional": true`) {
		t.Errorf("operation %s: provisional %v, digest %q; want it provisional, its receipt marked so", o.OperationID, o.Provisional, o.ReceiptDigest)
	}
	b, err := p.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := resolvedSchema(t).Validate(decode(t, b)); err != nil {
		t.Errorf("a packet of issued receipts does not match the schema: %v", err)
	}
	if md := string(p.Markdown()); !strings.Contains(md, "2 receipts are included as issued") || !strings.Contains(md, "`taskgate packet verify FILE --jwks JWKS` checks it and each receipt against `jwks.json`") ||
		!strings.Contains(md, "Embedded receipt (issued, version 1, sha256 "+receipt.Digest(docs[0])+")") {
		t.Errorf("Markdown does not say how the issued receipts are named and checked:\n%s", md)
	}

	v, att, err := receipt.VerifyAttestation(context.Background(), env, packet.PredicateType, packet.DocumentKey, "the review packet", receipt.PublicKeys{keyID(t): signingKey.Public()})
	if err != nil || !v.OK() {
		t.Fatalf("the signed packet: %+v, %v; want it verified", v, err)
	}
	want := []receipt.Subject{
		{Name: "receipt/acme/suite-clean/v1", SHA256: receipt.Digest(docs[0])},
		{Name: "receipt/acme/suite-breach/v1", SHA256: receipt.Digest(docs[1])},
	}
	if !slices.Equal(att.Subjects, want) {
		t.Errorf("subjects = %+v, want %+v", att.Subjects, want)
	}

	none, err := packet.Build(&packet.Input{Operations: provisional(clean())})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := packet.Statement(none); err == nil || !strings.Contains(err.Error(), "includes no issued receipt") {
		t.Errorf("Statement of a packet of provisional receipts = %v; want it refused", err)
	}
}

// TestEditedSignedPacket: a signed packet whose content or listed digest
// was changed fails, naming the field.
func TestEditedSignedPacket(t *testing.T) {
	_, env, _ := signedPacket(t)
	keys := receipt.PublicKeys{keyID(t): signingKey.Public()}
	for _, tc := range []struct {
		name string
		edit func(st map[string]any)
		want string
	}{
		{"a receipt's digest", func(st map[string]any) {
			st["subject"].([]any)[1].(map[string]any)["digest"].(map[string]any)["sha256"] = strings.Repeat("0", 64)
		}, "subject[1].digest.sha256 differs from what was signed"},
		{"a figure", func(st map[string]any) {
			st["predicate"].(map[string]any)[packet.DocumentKey].(map[string]any)["summary"].(map[string]any)["final_cost_usd"] = "1.00"
		}, "summary.final_cost_usd differs from what was signed"},
		{"the verdict", func(st map[string]any) {
			st["predicate"].(map[string]any)[packet.DocumentKey].(map[string]any)["verdict"].(map[string]any)["status"] = "ready"
		}, "verdict.status differs from what was signed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, _, err := receipt.VerifyAttestation(context.Background(), receipttest.EditStatement(t, env, tc.edit), packet.PredicateType, packet.DocumentKey, "the review packet", keys)
			if err != nil {
				t.Fatal(err)
			}
			var msgs []string
			for _, p := range v.Problems {
				msgs = append(msgs, p.Message)
			}
			if v.OK() || !slices.Contains(msgs, "the signature does not match the review packet's statement") || !slices.Contains(msgs, tc.want) {
				t.Errorf("problems %q; want the signature refused and %q", msgs, tc.want)
			}
		})
	}
}

func TestCheckReceipts(t *testing.T) {
	a, b, c := strings.Repeat("a", 64), strings.Repeat("b", 64), strings.Repeat("c", 64)
	listed := []receipt.Subject{{Name: "receipt/acme/op-1/v1", SHA256: a}, {Name: "receipt/acme/op-2/v2", SHA256: b}}
	for _, tc := range []struct {
		name string
		have map[string]string
		want []string // the fields named, in order
	}{
		{"each as listed", map[string]string{"receipt/acme/op-1/v1": a, "receipt/acme/op-2/v2": b}, nil},
		{"a swapped receipt", map[string]string{"receipt/acme/op-1/v1": a, "receipt/acme/op-2/v2": c}, []string{"receipt/acme/op-2/v2"}},
		{"one missing", map[string]string{"receipt/acme/op-1/v1": a}, []string{"receipt/acme/op-2/v2"}},
		{"another version", map[string]string{"receipt/acme/op-1/v1": a, "receipt/acme/op-2/v1": c}, []string{"receipt/acme/op-2/v2", "receipt/acme/op-2/v1"}},
		{"none at hand", nil, []string{"receipt/acme/op-1/v1", "receipt/acme/op-2/v2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := packet.CheckReceipts(listed, tc.have)
			var fields []string
			for _, p := range got {
				if p.Kind != receipt.ProblemSubject || !strings.Contains(p.Message, p.Field) {
					t.Errorf("problem %+v; want a subject problem naming its receipt", p)
				}
				fields = append(fields, p.Field)
			}
			if !slices.Equal(fields, tc.want) {
				t.Errorf("problems name %q, want %q", fields, tc.want)
			}
		})
	}
	swapped := packet.CheckReceipts(listed, map[string]string{"receipt/acme/op-1/v1": a, "receipt/acme/op-2/v2": c})
	if want := `receipt "receipt/acme/op-2/v2" is not the one the packet lists: its sha256 is ` + c + ", the packet lists " + b; swapped[0].Message != want {
		t.Errorf("message %q, want %q", swapped[0].Message, want)
	}
}
