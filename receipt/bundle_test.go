package receipt_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"strings"
	"testing"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/receipt"
)

// signers are one key of each algorithm receipts are signed with.
func signers(t *testing.T) map[ledger.SigningAlgorithm]crypto.Signer {
	t.Helper()
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return map[ledger.SigningAlgorithm]crypto.Signer{ledger.SigningEdDSA: testKey(1), ledger.SigningES256: ec}
}

func trust(t *testing.T, key crypto.Signer) (receipt.PublicKeys, string) {
	t.Helper()
	kid, err := receipt.KeyID(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	return receipt.PublicKeys{kid: key.Public()}, kid
}

// Either algorithm signs both forms, and each verifies as signed with it.
func TestSignAndVerifyWithEitherAlgorithm(t *testing.T) {
	ctx := context.Background()
	for alg, key := range signers(t) {
		t.Run(string(alg), func(t *testing.T) {
			keys, kid := trust(t, key)
			r := receipt.Build(clean())
			if err := receipt.Sign(r, key, signedAt); err != nil {
				t.Fatal(err)
			}
			if r.Signature.Algorithm != string(alg) || r.Signature.KeyID != kid {
				t.Errorf("signature block %+v; want alg %s by %s", r.Signature, alg, kid)
			}
			doc, err := r.JSON()
			if err != nil {
				t.Fatal(err)
			}
			if v, err := receipt.Verify(doc, keys); err != nil || !v.OK() || v.Algorithm != alg {
				t.Errorf("Verify(JWS) = %+v, %v; want it verified as %s", v, err, alg)
			}
			edited := strings.Replace(string(doc), `"final_cost_usd": "17.84"`, `"final_cost_usd": "1.84"`, 1)
			if edited == string(doc) {
				t.Fatalf("the receipt holds no final_cost_usd of 17.84 to edit:\n%s", doc)
			}
			if v, err := receipt.Verify([]byte(edited), keys); err != nil || v.OK() || !hasField(v, "final_cost_usd") {
				t.Errorf("Verify(edited JWS) = %+v, %v; want final_cost_usd named", v, err)
			}

			in := clean()
			in.Operation.ChainHead = chainHead
			st, err := receipt.Statement(receipt.Build(in), receipt.Issue{Version: 1})
			if err != nil {
				t.Fatal(err)
			}
			env, err := receipt.Envelope(ctx, st, key, kid)
			if err != nil {
				t.Fatal(err)
			}
			if v, err := receipt.VerifyEnvelope(ctx, env, keys); err != nil || !v.OK() || v.Algorithm != alg || v.KeyID != kid {
				t.Errorf("VerifyEnvelope = %+v, %v; want it verified as %s by %s", v, err, alg, kid)
			}
			b, err := receipt.Bundle(env, kid)
			if err != nil {
				t.Fatal(err)
			}
			checkBundle(t, b, env, kid)
			if v, err := receipt.VerifyBundle(ctx, b, keys); err != nil || !v.OK() || v.Form != receipt.FormBundle || v.KeyID != kid || v.Version != 1 {
				t.Errorf("VerifyBundle = %+v, %v; want version 1 verified as signed by %s", v, err, kid)
			}
			// An edited figure fails in the bundle as in the envelope.
			editedEnv := editStatement(t, env, func(_, r map[string]any) { r["final_cost_usd"] = "1.84" })
			eb, err := receipt.Bundle(editedEnv, kid)
			if err != nil {
				t.Fatal(err)
			}
			if v, err := receipt.VerifyBundle(ctx, eb, keys); err != nil || v.OK() || !hasField(v, "final_cost_usd") {
				t.Errorf("VerifyBundle(edited) = %+v, %v; want final_cost_usd named", v, err)
			}
			// A hint naming another key points at a key that did not sign.
			other, otherKid := trust(t, testKey(2))
			other[kid] = keys[kid]
			hb, err := receipt.Bundle(env, otherKid)
			if err != nil {
				t.Fatal(err)
			}
			if v, err := receipt.VerifyBundle(ctx, hb, other); err != nil || v.OK() {
				t.Errorf("VerifyBundle(hint naming key %s) = %+v, %v; want it refused", otherKid, v, err)
			}
		})
	}
}

// checkBundle checks b's shape against the Sigstore bundle v0.3 JSON: the
// media type, the public-key hint and the issued envelope, its
// signatures with empty key IDs.
func checkBundle(t *testing.T, b, env []byte, kid string) {
	t.Helper()
	var got struct {
		MediaType            string `json:"mediaType"`
		VerificationMaterial struct {
			PublicKey struct {
				Hint string `json:"hint"`
			} `json:"publicKey"`
		} `json:"verificationMaterial"`
		DSSEEnvelope map[string]any `json:"dsseEnvelope"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := json.Unmarshal(env, &want); err != nil {
		t.Fatal(err)
	}
	for _, s := range want["signatures"].([]any) {
		s.(map[string]any)["keyid"] = ""
	}
	gotEnv, _ := json.Marshal(got.DSSEEnvelope)
	wantEnv, _ := json.Marshal(want)
	if got.MediaType != "application/vnd.dev.sigstore.bundle.v0.3+json" || got.VerificationMaterial.PublicKey.Hint != kid || string(gotEnv) != string(wantEnv) {
		t.Errorf("bundle %s; want media type v0.3, hint %s and the envelope %s", b, kid, wantEnv)
	}
}

func hasField(v *receipt.Verification, field string) bool {
	for _, p := range v.Problems {
		if p.Kind == receipt.ProblemField && p.Field == field {
			return true
		}
	}
	return false
}

// A P-384 key signs no receipt.
func TestOtherCurvesRefused(t *testing.T) {
	k, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if err := receipt.Sign(receipt.Build(clean()), k, signedAt); err == nil || !strings.Contains(err.Error(), "neither an Ed25519 nor an ECDSA P-256") {
		t.Errorf("Sign with a P-384 key = %v; want it refused", err)
	}
}
