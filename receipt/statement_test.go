package receipt_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/taskgate/taskgate/canon"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/receipt/receipttest"
)

// issuedClean is the clean receipt issued as version 1, signed with
// testKey(1).
func issuedClean(t *testing.T) []byte {
	t.Helper()
	in := clean()
	in.Operation.ChainHead = chainHead
	st, err := receipt.Statement(receipt.Build(in), receipt.Issue{Version: 1})
	if err != nil {
		t.Fatal(err)
	}
	kid := kidOf(t, 1)
	env, err := receipt.Envelope(context.Background(), st, testKey(1), kid)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func kidOf(t *testing.T, seed byte) string {
	t.Helper()
	for kid := range keysOf(t, testKey(seed)) {
		return kid
	}
	return ""
}

func TestStatementIsAnInTotoStatementOverTheChainHead(t *testing.T) {
	in := clean()
	in.Operation.ChainHead = chainHead
	r := receipt.Build(in)
	a, err := receipt.Statement(r, receipt.Issue{Version: 2, Previous: strings.Repeat("ab", 32)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := receipt.Statement(receipt.Build(in), receipt.Issue{Version: 2, Previous: strings.Repeat("ab", 32)})
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) {
		t.Errorf("one receipt gave two statements:\n%s\n%s", a, b)
	}
	var st struct {
		Type          string `json:"_type"`
		PredicateType string `json:"predicateType"`
		Subject       []struct {
			Name   string            `json:"name"`
			Digest map[string]string `json:"digest"`
		} `json:"subject"`
		Predicate map[string]json.RawMessage `json:"predicate"`
	}
	if err := json.Unmarshal(a, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type != "https://in-toto.io/Statement/v1" || st.PredicateType != receipt.PredicateType {
		t.Errorf("_type %q, predicateType %q; want an in-toto Statement v1 of %s", st.Type, st.PredicateType, receipt.PredicateType)
	}
	if len(st.Subject) != 1 || st.Subject[0].Name != receipt.SubjectChainHead || st.Subject[0].Digest["sha256"] != chainHead {
		t.Errorf("subjects %+v, want the chain head %s", st.Subject, chainHead)
	}
	if string(st.Predicate["version"]) != "2" || !strings.Contains(string(st.Predicate["previous"]), strings.Repeat("ab", 32)) {
		t.Errorf("predicate version %s previous %s, want 2 naming the previous digest", st.Predicate["version"], st.Predicate["previous"])
	}
	var got receipt.Receipt
	if err := json.Unmarshal(st.Predicate[receipt.DocumentKey], &got); err != nil {
		t.Fatal(err)
	}
	want, _ := r.JSON()
	back, _ := got.JSON()
	if string(want) != string(back) {
		t.Errorf("the predicate's receipt reads back as\n%s\nwant\n%s", back, want)
	}

	in.Operation.ChainHead = ""
	if _, err := receipt.Statement(receipt.Build(in), receipt.Issue{Version: 1}); err == nil {
		t.Error("a receipt without a chain head was made a statement")
	}
	in.Operation.ChainHead = chainHead
	if _, err := receipt.Statement(receipt.Build(in), receipt.Issue{Version: 2}); err == nil {
		t.Error("version 2 naming no previous version was made a statement")
	}
}

func TestVerifyEnvelope(t *testing.T) {
	ctx := context.Background()
	env := issuedClean(t)
	v, err := receipt.VerifyEnvelope(ctx, env, keysOf(t, testKey(1)))
	if err != nil {
		t.Fatal(err)
	}
	if !v.OK() || v.Form != receipt.FormDSSE || v.OperationID != "settlement-regression-842" || v.ChainHead != chainHead || v.Version != 1 ||
		v.KeyID != kidOf(t, 1) || v.Fields == 0 {
		t.Fatalf("verification %+v, want it to hold for version 1 signed by %s", v, kidOf(t, 1))
	}

	for _, tc := range []struct {
		name   string
		doc    []byte
		keys   receipt.PublicKeys
		kind   receipt.ProblemKind
		fields []string
	}{
		{"an edited figure", editStatement(t, env, func(_, r map[string]any) { r["final_cost_usd"] = "1.84" }),
			keysOf(t, testKey(1)), receipt.ProblemSignature, []string{"final_cost_usd"}},
		{"a reordered lineage", editStatement(t, env, func(_, r map[string]any) {
			l := r["lineage"].([]any)
			slices.Reverse(l)
		}), keysOf(t, testKey(1)), receipt.ProblemSignature, []string{"lineage[0]", "lineage[1]"}},
		{"a swapped subject", editStatement(t, env, func(st, _ map[string]any) {
			st["subject"].([]any)[0].(map[string]any)["digest"] = map[string]any{"sha256": strings.Repeat("0", 64)}
		}), keysOf(t, testKey(1)), receipt.ProblemSignature, []string{"subject[0].digest.sha256"}},
		{"another version number", editStatement(t, env, func(st, _ map[string]any) {
			st["predicate"].(map[string]any)["version"] = 3
		}), keysOf(t, testKey(1)), receipt.ProblemSignature, []string{"version"}},
		{"an untrusted key", env, keysOf(t, testKey(2)), receipt.ProblemKey, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := receipt.VerifyEnvelope(ctx, tc.doc, tc.keys)
			if err != nil {
				t.Fatal(err)
			}
			if v.OK() || v.Problems[0].Kind != tc.kind {
				t.Fatalf("problems %+v, want first a %s problem", v.Problems, tc.kind)
			}
			var named []string
			for _, p := range v.Problems[1:] {
				named = append(named, p.Field)
			}
			for _, f := range tc.fields {
				if !slices.ContainsFunc(named, func(n string) bool { return n == f || strings.HasPrefix(n, f+".") }) {
					t.Errorf("problems %+v name no %s", v.Problems, f)
				}
			}
		})
	}

	if _, err := receipt.VerifyEnvelope(ctx, signedJSON(t), keysOf(t, testKey(1))); err == nil {
		t.Error("a JWS-signed JSON rendering was read as an envelope")
	}
	if receipt.IsEnvelope(signedJSON(t)) || !receipt.IsEnvelope(env) {
		t.Error("IsEnvelope does not tell an envelope from a JSON rendering")
	}
}

func TestIssuedReadsTheReceiptBack(t *testing.T) {
	env := issuedClean(t)
	r, err := receipt.Issued(env, "kid-x")
	if err != nil {
		t.Fatal(err)
	}
	if r.Issue == nil || r.Issue.Version != 1 || r.Issue.Digest != receipt.Digest(env) || r.Issue.KeyID != "kid-x" || r.Issue.Previous != "" {
		t.Errorf("issue line %+v, want version 1, the document's digest and kid-x", r.Issue)
	}
	in := clean()
	in.Operation.ChainHead = chainHead
	want, _ := receipt.Build(in).JSON()
	r.Issue = nil
	got, _ := r.JSON()
	if string(got) != string(want) {
		t.Errorf("the issued receipt reads back as\n%s\nwant\n%s", got, want)
	}
}

func TestSubstanceIgnoresWhenItWasBuilt(t *testing.T) {
	in := clean()
	in.Operation.ChainHead = chainHead
	base, err := receipt.Substance(receipt.Build(in))
	if err != nil {
		t.Fatal(err)
	}
	in.Now = signedAt
	in.Operation.ChainHead = strings.Repeat("cd", 32)
	same, err := receipt.Substance(receipt.Build(in))
	if err != nil {
		t.Fatal(err)
	}
	if same != base {
		t.Error("the substance changed with the build time and chain head alone")
	}
	in.Charges = append(in.Charges, &ledger.Charge{ID: 302, OperationRef: 42, RemoteJobRef: 201, ProviderChargeID: "ch-late", Amount: usd("0.50"),
		Status: ledger.ChargeFinal, Source: "provider", CreatedAt: signedAt, UpdatedAt: signedAt})
	late, err := receipt.Substance(receipt.Build(in))
	if err != nil {
		t.Fatal(err)
	}
	if late == base {
		t.Error("a late charge left the substance as it was")
	}
}

// editStatement edits an envelope's statement and the receipt document in
// its predicate, keeping the signature.
func editStatement(t *testing.T, env []byte, fn func(st map[string]any, r map[string]any)) []byte {
	t.Helper()
	return receipttest.EditStatement(t, env, func(st map[string]any) {
		fn(st, st["predicate"].(map[string]any)[receipt.DocumentKey].(map[string]any))
	})
}

func BenchmarkStatement(b *testing.B) {
	in := clean()
	in.Operation.ChainHead = chainHead
	r := receipt.Build(in)
	for b.Loop() {
		if _, err := receipt.Statement(r, receipt.Issue{Version: 2, Previous: strings.Repeat("ab", 32)}); err != nil {
			b.Fatal(err)
		}
	}
}

// inTotoEncoding reads st into an in-toto Statement, checks it, and
// returns protojson's encoding of it, canonicalised.
func inTotoEncoding(t *testing.T, st []byte) []byte {
	t.Helper()
	var typed intoto.Statement
	if err := protojson.Unmarshal(st, &typed); err != nil {
		t.Fatal(err)
	}
	if err := typed.Validate(); err != nil {
		t.Fatal(err)
	}
	raw, err := protojson.Marshal(&typed)
	if err != nil {
		t.Fatal(err)
	}
	again, err := canon.Canonicalize(raw)
	if err != nil {
		t.Fatal(err)
	}
	return again
}

// A statement is the in-toto types' own encoding of itself: read into an
// in-toto Statement and encoded again by protojson, every golden
// scenario's statement canonicalises to the same bytes.
func TestStatementIsTheInTotoEncoding(t *testing.T) {
	for _, tc := range goldenCases {
		in := tc.input()
		in.Operation.ChainHead = chainHead
		for _, issue := range []receipt.Issue{{Version: 1}, {Version: 2, Previous: strings.Repeat("ab", 32)}} {
			st, err := receipt.Statement(receipt.Build(in), issue)
			if err != nil {
				t.Fatal(err)
			}
			if again := inTotoEncoding(t, st); !bytes.Equal(st, again) {
				t.Errorf("%s version %d: the statement\n%s\nis not its in-toto encoding\n%s", tc.name, issue.Version, st, again)
			}
		}
	}
}

// Attest writes what the in-toto types would, also for a subject without
// a name, and refuses a predicate type or subject name that is not UTF-8
// rather than sign a replacement character in its place.
func TestAttestFrame(t *testing.T) {
	st, err := receipt.Attest("https://example.test/p/v1", "doc", []receipt.Subject{{Name: "", SHA256: chainHead}, {Name: "a<b>&\u2028", SHA256: chainHead}},
		map[string]any{"doc": map[string]any{"x": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if again := inTotoEncoding(t, st); !bytes.Equal(st, again) {
		t.Errorf("the statement\n%s\nis not its in-toto encoding\n%s", st, again)
	}
	for name, c := range map[string]struct {
		predicateType, subject string
	}{
		"predicate type": {"https://example.test/\xff", "chain"},
		"subject name":   {"https://example.test/p/v1", "chain\xff"},
	} {
		if _, err := receipt.Attest(c.predicateType, "doc", []receipt.Subject{{Name: c.subject, SHA256: chainHead}}, map[string]any{"doc": map[string]any{}}); err == nil || !strings.Contains(err.Error(), "UTF-8") {
			t.Errorf("a %s that is not UTF-8: error %v, want it refused", name, err)
		}
	}
}
