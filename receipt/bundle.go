package receipt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// BundleMediaType is the media type of a Sigstore bundle v0.3 (the
// sigstore/protobuf-specs Bundle message in its JSON form).
const BundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json"

// bundle is the part of the Sigstore bundle v0.3 an issued receipt fills:
// the verification material is a hint naming the public key (no
// certificate, no transparency-log entry: the key is the gateway's, and
// the receipt is verified against it offline), and the content is the
// DSSE envelope as issued, less its signatures' key IDs (see [Bundle]).
// Its JSON is protobuf's: the envelope's payload and signatures are
// base64, as in the DSSE JSON form.
type bundle struct {
	MediaType            string               `json:"mediaType"`
	VerificationMaterial verificationMaterial `json:"verificationMaterial"`
	DSSEEnvelope         json.RawMessage      `json:"dsseEnvelope"`
}

type verificationMaterial struct {
	PublicKey publicKeyIdentifier `json:"publicKey"`
}

type publicKeyIdentifier struct {
	Hint string `json:"hint"`
}

// Bundle wraps an issued receipt or review packet (a DSSE envelope as
// [Envelope] wrote it) signed by key kid as a Sigstore bundle v0.3 whose verification material
// is the public-key hint kid, the form cosign verify-blob-attestation
// --bundle reads. The hint names the key, so the envelope's signatures
// carry no key ID: cosign skips a signature whose key ID is not its own
// name for the key it was given, which is not taskgate's kid. A key ID is
// not signed, so the signatures are the issued ones.
func Bundle(envelope []byte, kid string) ([]byte, error) {
	env, _, _, err := readStatement(envelope)
	if err != nil {
		return nil, fmt.Errorf("wrap the issued statement in a Sigstore bundle: %w", err)
	}
	for i := range env.Signatures {
		env.Signatures[i].KeyID = ""
	}
	inner, err := json.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("encode the Sigstore bundle: %w", err)
	}
	b, err := json.Marshal(bundle{
		MediaType:            BundleMediaType,
		VerificationMaterial: verificationMaterial{PublicKey: publicKeyIdentifier{Hint: kid}},
		DSSEEnvelope:         inner,
	})
	if err != nil {
		return nil, fmt.Errorf("encode the Sigstore bundle: %w", err)
	}
	return append(b, '\n'), nil
}

// IsBundle reports whether doc looks like a Sigstore bundle rather than a
// DSSE envelope or a receipt's JSON rendering: a JSON object with a
// mediaType.
func IsBundle(doc []byte) bool {
	var probe struct {
		MediaType *string `json:"mediaType"`
	}
	return json.Unmarshal(bytes.TrimSpace(doc), &probe) == nil && probe.MediaType != nil
}

// VerifyBundle checks a Sigstore bundle holding an issued receipt as
// [VerifyEnvelope] checks the envelope, taking the public-key hint as the
// key ID of its signatures that name none. It fails only when doc is not
// such a bundle at all.
func VerifyBundle(ctx context.Context, doc []byte, keys PublicKeys) (*Verification, error) {
	inner, err := Unbundle(doc)
	if err != nil {
		return nil, err
	}
	v, err := VerifyEnvelope(ctx, inner, keys)
	if err != nil {
		return nil, fmt.Errorf("the bundle's dsseEnvelope: %w", err)
	}
	v.Form = FormBundle
	return v, nil
}

// Unbundle returns the DSSE envelope a Sigstore bundle as [Bundle] wrote
// it holds, each signature that names no key ID named by the bundle's
// public-key hint. It fails when doc is not such a bundle.
func Unbundle(doc []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	var b bundle
	if err := dec.Decode(&b); err != nil {
		return nil, fmt.Errorf("the file is not a Sigstore bundle as taskgate writes it (a public-key hint and a DSSE envelope): %w", err)
	}
	if b.MediaType != BundleMediaType {
		return nil, fmt.Errorf("the bundle's mediaType is %q, not %s", b.MediaType, BundleMediaType)
	}
	if len(b.DSSEEnvelope) == 0 {
		return nil, errors.New("the bundle holds no dsseEnvelope")
	}
	env, _, _, err := readStatement(b.DSSEEnvelope)
	if err != nil {
		return nil, fmt.Errorf("the bundle's dsseEnvelope: %w", err)
	}
	for i := range env.Signatures {
		if env.Signatures[i].KeyID == "" {
			env.Signatures[i].KeyID = b.VerificationMaterial.PublicKey.Hint
		}
	}
	inner, err := json.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("read the bundle's dsseEnvelope: %w", err)
	}
	return inner, nil
}
