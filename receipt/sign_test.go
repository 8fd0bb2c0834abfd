package receipt_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"go.yaml.in/yaml/v3"

	"github.com/taskgate/taskgate/receipt"
)

// testKey is a fixed Ed25519 key, so that a failure reproduces.
func testKey(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

func keysOf(t *testing.T, keys ...ed25519.PrivateKey) receipt.PublicKeys {
	t.Helper()
	out := receipt.PublicKeys{}
	for _, k := range keys {
		pub := k.Public().(ed25519.PublicKey)
		kid, err := receipt.KeyID(pub)
		if err != nil {
			t.Fatal(err)
		}
		out[kid] = pub
	}
	return out
}

const chainHead = "9f2c4e0b7a1d3c5e8f60718293a4b5c6d7e8f90112233445566778899aabbccd"

var signedAt = time.Date(2026, 5, 4, 10, 10, 0, 0, time.UTC)

// signedClean is the clean receipt, built from an operation whose chain
// head is chainHead, signed with testKey(1) at signedAt.
func signedClean(t *testing.T) *receipt.Receipt {
	t.Helper()
	in := clean()
	in.Operation.ChainHead = chainHead
	r := receipt.Build(in)
	if err := receipt.Sign(r, testKey(1), signedAt.Add(400*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	return r
}

func signedJSON(t *testing.T) []byte {
	t.Helper()
	b, err := signedClean(t).JSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// edit decodes a JSON rendering, lets fn change it and encodes it again.
func edit(t *testing.T, doc []byte, fn func(doc, r map[string]any)) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var d map[string]any
	if err := dec.Decode(&d); err != nil {
		t.Fatal(err)
	}
	fn(d, d[receipt.DocumentKey].(map[string]any))
	out, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func verify(t *testing.T, doc []byte, keys receipt.PublicKeys) *receipt.Verification {
	t.Helper()
	v, err := receipt.Verify(doc, keys)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	return v
}

// problems lists v's problems as "kind field".
func problems(v *receipt.Verification) []string {
	out := []string{}
	for _, p := range v.Problems {
		out = append(out, string(p.Kind)+" "+p.Field)
	}
	return out
}

func TestSignAndVerify(t *testing.T) {
	r := signedClean(t)
	kid, err := receipt.KeyID(testKey(1).Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	s := r.Signature
	if s == nil || s.Algorithm != "EdDSA" || s.KeyID != kid || !s.SignedAt.Equal(signedAt) || r.ChainHead != chainHead {
		t.Fatalf("signature %+v, chain head %q; want EdDSA by %s at %s over chain head %s", s, r.ChainHead, kid, signedAt, chainHead)
	}
	if parts := strings.Split(s.JWS, "."); len(parts) != 3 || parts[1] != "" {
		t.Errorf("JWS %q is not detached (header..signature)", s.JWS)
	}

	doc := signedJSON(t)
	v := verify(t, doc, keysOf(t, testKey(1), testKey(2)))
	if !v.OK() {
		t.Fatalf("a signed receipt as rendered does not verify: %v", v.Problems)
	}
	if v.OperationID != "settlement-regression-842" || v.KeyID != kid || !v.SignedAt.Equal(signedAt) || v.ChainHead != chainHead || v.Fields < 50 {
		t.Errorf("verification %+v; want the operation, key %s, signed at %s, the chain head and every field counted", v, kid, signedAt)
	}

	// The canonical form is what is signed: another layout of the same
	// JSON verifies.
	var compact bytes.Buffer
	if err := json.Compact(&compact, doc); err != nil {
		t.Fatal(err)
	}
	if v := verify(t, compact.Bytes(), keysOf(t, testKey(1))); !v.OK() {
		t.Errorf("the compacted rendering does not verify: %v", v.Problems)
	}
	if v := verify(t, edit(t, doc, func(map[string]any, map[string]any) {}), keysOf(t, testKey(1))); !v.OK() {
		t.Errorf("the rendering with its keys reordered does not verify: %v", v.Problems)
	}

	// Signing again replaces the signature.
	if err := receipt.Sign(r, testKey(2), signedAt.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	again, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if v := verify(t, again, keysOf(t, testKey(2))); !v.OK() || !v.SignedAt.Equal(signedAt.Add(time.Minute)) {
		t.Errorf("a receipt signed again: %+v; want it verified by the second key at the new time", v)
	}
}

// TestVerifyNamesWhatFailed changes one thing at a time in a signed
// receipt and checks that verification fails naming it.
func TestVerifyNamesWhatFailed(t *testing.T) {
	doc := signedJSON(t)
	keys := keysOf(t, testKey(1))
	setSig := func(r map[string]any, k string, v any) { r["signature"].(map[string]any)[k] = v }
	jws := func(r map[string]any) string { return r["signature"].(map[string]any)["jws"].(string) }
	for _, tc := range []struct {
		name string
		fn   func(doc, r map[string]any)
		want []string
	}{
		{"final cost", func(_, r map[string]any) { r["final_cost_usd"] = "1.00" },
			[]string{"signature signature.jws", "field final_cost_usd"}},
		{"attempts", func(_, r map[string]any) { r["attempts"] = json.Number("1") },
			[]string{"signature signature.jws", "field attempts"}},
		{"review status", func(_, r map[string]any) { r["review_status"] = "needs_review" },
			[]string{"signature signature.jws", "field review_status"}},
		{"a lineage row's field", func(_, r map[string]any) {
			r["lineage"].([]any)[1].(map[string]any)["client_result"] = "timed_out"
		}, []string{"signature signature.jws", "field lineage[1].client_result"}},
		{"a lineage row removed", func(_, r map[string]any) { r["lineage"] = r["lineage"].([]any)[:1] },
			[]string{"signature signature.jws", "field lineage[1]"}},
		{"a lineage row added", func(_, r map[string]any) {
			rows := r["lineage"].([]any)
			r["lineage"] = append(rows, rows[1])
		}, []string{"signature signature.jws", "field lineage[2]"}},
		{"a charge's amount", func(_, r map[string]any) { r["charges"].([]any)[0].(map[string]any)["amount"] = "7.84" },
			[]string{"signature signature.jws", "field charges[0].amount"}},
		{"the approval's ceiling", func(_, r map[string]any) { r["approval"].(map[string]any)["max_total_cost"] = "200.00" },
			[]string{"signature signature.jws", "field approval.max_total_cost"}},
		{"the chain head", func(_, r map[string]any) { r["chain_head"] = strings.Repeat("0", 64) },
			[]string{"signature signature.jws", "field chain_head"}},
		{"a field added", func(_, r map[string]any) { r["approved_by"] = "mallory" },
			[]string{"signature signature.jws", "field approved_by"}},
		{"a field removed", func(_, r map[string]any) { delete(r, "breaches") },
			[]string{"signature signature.jws", "field breaches"}},
		{"a signature byte", func(_, r map[string]any) {
			s := jws(r)
			i := strings.LastIndex(s, ".") + 5
			c := byte('A')
			if s[i] == 'A' {
				c = 'B'
			}
			setSig(r, "jws", s[:i]+string(c)+s[i+1:])
		}, []string{"signature signature.jws"}},
		{"the signature's kid", func(_, r map[string]any) { setSig(r, "kid", strings.Repeat("k", 43)) },
			[]string{"signature_block signature.kid"}},
		{"the signature's time", func(_, r map[string]any) { setSig(r, "signed_at", "2026-05-01T00:00:00Z") },
			[]string{"signature_block signature.signed_at"}},
		{"the signature's algorithm", func(_, r map[string]any) { setSig(r, "alg", "none") },
			[]string{"signature_block signature.alg"}},
		{"a field in the signature block", func(_, r map[string]any) { setSig(r, "note", "trust me") },
			[]string{"signature_block signature"}},
		{"the signature's payload attached", func(_, r map[string]any) {
			s := jws(r)
			setSig(r, "jws", strings.Replace(s, "..", ".e30.", 1))
		}, []string{"signature_block signature.jws"}},
		{"a document beside the receipt", func(d, _ map[string]any) { d["note"] = "unsigned" },
			[]string{"field note"}},
		{"the signature removed", func(_, r map[string]any) { delete(r, "signature") },
			[]string{"unsigned signature"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := verify(t, edit(t, doc, tc.fn), keys)
			if got := problems(v); !slices.Equal(got, tc.want) {
				t.Errorf("problems %q, want %q\n%v", got, tc.want, v.Problems)
			}
			for _, p := range v.Problems {
				if p.Kind == receipt.ProblemField && !strings.HasPrefix(p.Message, p.Field+" ") {
					t.Errorf("problem %q does not name its field first", p.Message)
				}
				if p.Kind == receipt.ProblemSignature && p.Message != "the signature does not match the receipt's content" {
					t.Errorf("signature problem says %q", p.Message)
				}
			}
		})
	}

	t.Run("unknown key", func(t *testing.T) {
		v := verify(t, doc, keysOf(t, testKey(2)))
		if got := problems(v); !slices.Equal(got, []string{"key signature.kid"}) || !strings.Contains(v.Problems[0].Message, v.KeyID) {
			t.Errorf("problems %v, want one naming the unknown key %s", v.Problems, v.KeyID)
		}
	})

	// A forger who changes a figure and rewrites its signed digest to
	// match changes the protected header: the signature still fails.
	t.Run("digests rewritten too", func(t *testing.T) {
		forged := edit(t, doc, func(_, r map[string]any) {
			r["final_cost_usd"] = "1.00"
			parts := strings.Split(jws(r), ".")
			h, err := base64.RawURLEncoding.DecodeString(parts[0])
			if err != nil {
				t.Fatal(err)
			}
			var header map[string]any
			if err := json.Unmarshal(h, &header); err != nil {
				t.Fatal(err)
			}
			var fields map[string]string
			probe := edit(t, doc, func(_, r map[string]any) { r["final_cost_usd"] = "1.00"; delete(r, "signature") })
			fields = digestsOf(t, probe)
			header["taskgate_fields"] = fields
			nh, err := json.Marshal(header)
			if err != nil {
				t.Fatal(err)
			}
			setSig(r, "jws", base64.RawURLEncoding.EncodeToString(nh)+".."+parts[2])
		})
		v := verify(t, forged, keys)
		if v.OK() || !slices.Contains(problems(v), "signature signature.jws") {
			t.Errorf("a receipt with a changed figure and rewritten digests: problems %v, want the signature to fail", v.Problems)
		}
	})

	t.Run("not a JSON receipt", func(t *testing.T) {
		y, err := signedClean(t).YAML()
		if err != nil {
			t.Fatal(err)
		}
		for name, b := range map[string][]byte{"yaml": y, "other JSON": []byte(`{"receipt":{}}`), "duplicate keys": []byte(`{"paid_tool_retry_receipt":{},"paid_tool_retry_receipt":{}}`)} {
			if _, err := receipt.Verify(b, keys); err == nil || !strings.Contains(err.Error(), "not a receipt's JSON rendering") {
				t.Errorf("%s: Verify = %v, want it refused as not a receipt's JSON rendering", name, err)
			}
		}
	})
}

// digestsOf signs an unsigned rendering with a throwaway key and returns
// the digests its header holds: what a forger would compute.
func digestsOf(t *testing.T, unsignedDoc []byte) map[string]string {
	t.Helper()
	var d struct {
		R *receipt.Receipt `json:"paid_tool_retry_receipt"`
	}
	if err := json.Unmarshal(unsignedDoc, &d); err != nil {
		t.Fatal(err)
	}
	if err := receipt.Sign(d.R, testKey(9), signedAt); err != nil {
		t.Fatal(err)
	}
	h, err := base64.RawURLEncoding.DecodeString(strings.Split(d.R.Signature.JWS, ".")[0])
	if err != nil {
		t.Fatal(err)
	}
	var header struct {
		Fields map[string]string `json:"taskgate_fields"`
	}
	if err := json.Unmarshal(h, &header); err != nil {
		t.Fatal(err)
	}
	return header.Fields
}

// TestSignedRenderings: the JSON rendering of a signed receipt matches the
// schema, and YAML and Markdown carry the signature block as text.
func TestSignedRenderings(t *testing.T) {
	r := signedClean(t)
	var s jsonschema.Schema
	if err := json.Unmarshal(receipt.Schema(), &s); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(signedJSON(t), &doc); err != nil {
		t.Fatal(err)
	}
	if err := rs.Validate(doc); err != nil {
		t.Errorf("a signed receipt's JSON does not match the schema: %v", err)
	}
	bad := edit(t, signedJSON(t), func(_, r map[string]any) { r["signature"].(map[string]any)["alg"] = "HS256" })
	var badDoc any
	if err := json.Unmarshal(bad, &badDoc); err != nil {
		t.Fatal(err)
	}
	if err := rs.Validate(badDoc); err == nil {
		t.Error("the schema accepts a signature with alg HS256")
	}

	y, err := r.YAML()
	if err != nil {
		t.Fatal(err)
	}
	var yd struct {
		R struct {
			ChainHead string `yaml:"chain_head"`
			Signature struct {
				Alg      string `yaml:"alg"`
				Kid      string `yaml:"kid"`
				SignedAt string `yaml:"signed_at"`
				JWS      string `yaml:"jws"`
			} `yaml:"signature"`
		} `yaml:"paid_tool_retry_receipt"`
	}
	if err := yaml.Unmarshal(y, &yd); err != nil {
		t.Fatal(err)
	}
	if yd.R.ChainHead != chainHead || yd.R.Signature.Alg != "EdDSA" || yd.R.Signature.Kid != r.Signature.KeyID ||
		yd.R.Signature.SignedAt != "2026-05-04T10:10:00Z" || yd.R.Signature.JWS != r.Signature.JWS {
		t.Errorf("YAML carries %+v, want the chain head and the signature block", yd.R)
	}

	md := string(r.Markdown())
	for _, want := range []string{"| chain head | `" + chainHead + "` |", "\n### Signature\n", "by key `" + r.Signature.KeyID + "` (EdDSA)", "\n" + r.Signature.JWS + "\n"} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
	unsigned := receipt.Build(clean()).Markdown()
	if bytes.Contains(unsigned, []byte("Signature")) {
		t.Error("an unsigned receipt's Markdown has a signature section")
	}
}
