package receipt

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/taskgate/taskgate/canon"
	"github.com/taskgate/taskgate/ledger"
)

// Protected header parameters of a receipt's JWS beside alg and kid. They
// are private names (RFC 7515, section 4.3), prefixed to keep them apart
// from registered ones.
const (
	// headerSignedAt is when the receipt was signed, RFC 3339 in UTC.
	headerSignedAt = "taskgate_signed_at"
	// headerFields maps the path of every field of the signed receipt to
	// its digest (see fieldDigests).
	headerFields = "taskgate_fields"
)

// Signature is the signature block of a signed receipt: a detached JWS
// (RFC 7515, appendix F: header..signature, the payload left out) over the
// receipt's canonical form, and, as text for a reader, the algorithm, the
// key and the time the JWS's protected header holds.
//
// The canonical form is the RFC 8785 canonical JSON of the JSON rendering
// without this block; it holds the chain head the receipt was built from
// (chain_head). The protected header holds alg, kid, taskgate_signed_at
// and taskgate_fields, a digest of every field, by which a verifier names
// the field that was changed (see [Verify]).
type Signature struct {
	Algorithm string    `json:"alg" yaml:"alg"`
	KeyID     string    `json:"kid" yaml:"kid"`
	SignedAt  time.Time `json:"signed_at" yaml:"signed_at"`
	JWS       string    `json:"jws" yaml:"jws"`
}

// AlgorithmOf returns the algorithm a public key verifies: EdDSA for an
// Ed25519 key, ES256 for an ECDSA P-256 key. Any other key signs no
// receipt.
func AlgorithmOf(pub crypto.PublicKey) (ledger.SigningAlgorithm, error) {
	switch k := pub.(type) {
	case ed25519.PublicKey:
		if len(k) == ed25519.PublicKeySize {
			return ledger.SigningEdDSA, nil
		}
	case *ecdsa.PublicKey:
		if k.Curve == elliptic.P256() {
			return ledger.SigningES256, nil
		}
	}
	return "", fmt.Errorf("a %T is neither an Ed25519 nor an ECDSA P-256 public key; receipts are signed with those only", pub)
}

// KeyID is the key ID ("kid") of an Ed25519 or ECDSA P-256 public key: its
// RFC 7638 thumbprint (SHA-256), unpadded base64url. It is derived from
// the key, so a key set cannot name a key by another's ID.
func KeyID(pub crypto.PublicKey) (string, error) {
	if _, err := AlgorithmOf(pub); err != nil {
		return "", fmt.Errorf("compute a key ID: %w", err)
	}
	jwk := jose.JSONWebKey{Key: pub}
	tp, err := jwk.Thumbprint(crypto.SHA256)
	if err != nil {
		return "", fmt.Errorf("compute the key ID of a public key: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(tp), nil
}

// Sign signs r with key (Ed25519 or ECDSA P-256), as signed at at, and
// sets r.Signature; a signature r already carries is replaced. It reads no
// clock: at is the caller's. Sign fails when the receipt's JSON rendering
// cannot be canonicalised (it exceeds canon.MaxSize).
func Sign(r *Receipt, key crypto.Signer, at time.Time) error {
	alg, err := AlgorithmOf(key.Public())
	if err != nil {
		return fmt.Errorf("sign the receipt of %q: %w", r.OperationID, err)
	}
	kid, err := KeyID(key.Public())
	if err != nil {
		return err
	}
	r.Signature = nil
	doc, err := r.JSON()
	if err != nil {
		return err
	}
	payload, fields, err := signedContent(doc)
	if err != nil {
		return fmt.Errorf("sign the receipt of %q: %w", r.OperationID, err)
	}
	signedAt := at.UTC().Truncate(time.Second)
	opts := (&jose.SignerOptions{}).
		WithHeader(headerSignedAt, signedAt.Format(time.RFC3339)).
		WithHeader(headerFields, fields)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(alg), Key: jose.JSONWebKey{Key: key, KeyID: kid}}, opts)
	if err != nil {
		return fmt.Errorf("sign the receipt of %q: %w", r.OperationID, err)
	}
	obj, err := signer.Sign(payload)
	if err != nil {
		return fmt.Errorf("sign the receipt of %q: %w", r.OperationID, err)
	}
	jws, err := obj.DetachedCompactSerialize()
	if err != nil {
		return fmt.Errorf("sign the receipt of %q: %w", r.OperationID, err)
	}
	r.Signature = &Signature{Algorithm: string(alg), KeyID: kid, SignedAt: signedAt, JWS: jws}
	return nil
}

// signedContent returns what a signature covers of doc, a JSON rendering
// without its signature block: its canonical form and the digests of its
// receipt's fields.
func signedContent(doc []byte) ([]byte, map[string]string, error) {
	payload, err := canon.Canonicalize(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("canonicalise the receipt: %w", err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(payload, &top); err != nil {
		return nil, nil, fmt.Errorf("read the receipt: %w", err)
	}
	fields := map[string]string{}
	if err := fieldDigests(top[DocumentKey], "", fields); err != nil {
		return nil, nil, err
	}
	return payload, fields, nil
}

// digestSize is how many bytes of a field's SHA-256 its digest keeps.
//
// Why digests of fields, and why short ones: a verifier holding only the
// file must say which figure was changed, and the canonical form alone
// cannot tell it. The digests do not protect anything (the signature over
// the whole canonical form does, and a verdict never rests on them): once
// the signature fails, they are compared with the file's fields only to
// name the ones that differ. A forger who rewrites them as well changes
// the protected header, so the signature still fails; the names may then
// be wrong, the verdict never is. 128 bits keep an accidental match out of
// reach at half the size of a whole SHA-256.
const digestSize = 16

// fieldDigests adds to out the digest of every field of the canonical JSON
// value raw, by its path under prefix: object members joined by ".",
// array items as "[i]" (lineage[1].client_result). A field is a scalar, an
// empty array or an empty object; its digest is the unpadded base64url of
// the first digestSize bytes of the SHA-256 of its canonical JSON. raw
// must be canonical already ([canon.Canonicalize]): every value inside a
// canonical value is canonical as it stands, so a field's bytes are
// digested as they are.
func fieldDigests(raw json.RawMessage, prefix string, out map[string]string) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return fmt.Errorf("the receipt has no %s", DocumentKey)
	}
	switch raw[0] {
	case '{':
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil {
			return fmt.Errorf("read %s: %w", pathOr(prefix), err)
		}
		if len(obj) > 0 {
			for _, k := range slices.Sorted(maps.Keys(obj)) {
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				if err := fieldDigests(obj[k], p, out); err != nil {
					return err
				}
			}
			return nil
		}
	case '[':
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return fmt.Errorf("read %s: %w", pathOr(prefix), err)
		}
		if len(items) > 0 {
			for i, item := range items {
				if err := fieldDigests(item, prefix+"["+strconv.Itoa(i)+"]", out); err != nil {
					return err
				}
			}
			return nil
		}
	}
	sum := sha256.Sum256(raw)
	out[pathOr(prefix)] = base64.RawURLEncoding.EncodeToString(sum[:digestSize])
	return nil
}

// pathOr names the receipt itself where a path is empty.
func pathOr(p string) string {
	if p == "" {
		return "the receipt"
	}
	return p
}
