package receipt

import (
	"bytes"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/taskgate/taskgate/canon"
	"github.com/taskgate/taskgate/ledger"
)

// The forms of a signed receipt [Verify] and [VerifyEnvelope] check.
const (
	// FormJWS is a receipt's JSON rendering with a detached JWS in its
	// signature block, as receipts were signed before they were issued.
	FormJWS = "jws"
	// FormDSSE is an issued receipt: a DSSE envelope over its in-toto
	// statement.
	FormDSSE = "dsse"
	// FormBundle is an issued receipt in a Sigstore bundle v0.3.
	FormBundle = "sigstore-bundle"
)

// PublicKeys are the keys a verifier trusts, by key ID ([KeyID]): each an
// ed25519.PublicKey or an *ecdsa.PublicKey on P-256.
type PublicKeys map[string]crypto.PublicKey

// ProblemKind says which check of a signed receipt failed.
type ProblemKind string

const (
	// ProblemUnsigned: the receipt carries no signature block.
	ProblemUnsigned ProblemKind = "unsigned"
	// ProblemBlock: the signature block cannot be read, or its text
	// (alg, kid, signed_at) differs from what its JWS's protected header
	// holds.
	ProblemBlock ProblemKind = "signature_block"
	// ProblemKey: the key that signed is not among the trusted keys.
	ProblemKey ProblemKind = "key"
	// ProblemSignature: the signature does not match the receipt's
	// content; field problems then name what differs, when the signed
	// digests tell.
	ProblemSignature ProblemKind = "signature"
	// ProblemField: a field differs from what was signed, was signed and
	// is missing, or was not signed.
	ProblemField ProblemKind = "field"
	// ProblemSubject: a thing a signed statement names by digest is not
	// the one at hand, or is missing, or one at hand is not named.
	ProblemSubject ProblemKind = "subject"
)

// Problem is one check of a signed receipt that failed.
type Problem struct {
	Kind ProblemKind
	// Field is the path of the field concerned (final_cost_usd,
	// lineage[1].client_result, signature.kid), or empty.
	Field string
	// Message says what failed, as a sentence.
	Message string
}

// Verification is what [Verify] found: who signed the receipt, when, over
// which chain head, and the problems; the receipt verifies only when there
// are none.
type Verification struct {
	// Form is what was verified: FormJWS, FormDSSE or FormBundle.
	Form        string
	OperationID string
	// Version and Previous are an issued receipt's version and the digest
	// of the version before it (FormDSSE and FormBundle only).
	Version  int
	Previous string
	// KeyID and SignedAt are what the signature's protected header names;
	// Algorithm is what the key that signed signs with.
	KeyID     string
	Algorithm ledger.SigningAlgorithm
	SignedAt  time.Time
	ChainHead string
	// Fields is how many fields of the receipt its signature covers.
	Fields   int
	Problems []Problem
}

// OK reports whether every check held.
func (v *Verification) OK() bool { return len(v.Problems) == 0 }

func (v *Verification) fail(kind ProblemKind, field, format string, args ...any) {
	v.Problems = append(v.Problems, Problem{Kind: kind, Field: field, Message: fmt.Sprintf(format, args...)})
}

// signedHeader is what Verify reads of a receipt JWS's protected header.
type signedHeader struct {
	Alg      string            `json:"alg"`
	Kid      string            `json:"kid"`
	SignedAt string            `json:"taskgate_signed_at"`
	Fields   map[string]string `json:"taskgate_fields"`
}

// Verify checks a receipt's JSON rendering: that it carries a signature
// block, that the key which signed it is among keys, that the signature
// matches the receipt's canonical form, and that the block's text agrees
// with the signed header. Whatever fails is a [Problem] in the result;
// when the signature does not match, the fields whose digests differ from
// the signed ones are named. Verify fails only when doc is not a receipt's
// JSON rendering at all. It reads no clock and no key store.
func Verify(doc []byte, keys PublicKeys) (*Verification, error) {
	if _, err := canon.Canonicalize(doc); err != nil {
		return nil, fmt.Errorf("the file is not a receipt's JSON rendering: %w", err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(doc, &top); err != nil {
		return nil, fmt.Errorf("the file is not a receipt's JSON rendering: it is not a JSON object")
	}
	raw, ok := top[DocumentKey]
	if !ok {
		return nil, fmt.Errorf("the file is not a receipt's JSON rendering: it holds no %s", DocumentKey)
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, fmt.Errorf("the file is not a receipt's JSON rendering: its %s is not a JSON object", DocumentKey)
	}
	v := &Verification{Form: FormJWS}
	_ = json.Unmarshal(body["operation_id"], &v.OperationID)
	_ = json.Unmarshal(body["chain_head"], &v.ChainHead)
	for _, k := range slices.Sorted(maps.Keys(top)) {
		if k != DocumentKey {
			v.fail(ProblemField, k, "%s stands beside %s and was not signed", k, DocumentKey)
		}
	}

	sigRaw, signed := body["signature"]
	if !signed {
		v.fail(ProblemUnsigned, "signature", "the receipt is not signed: it carries no signature block")
		return v, nil
	}
	delete(body, "signature")
	unsigned, err := json.Marshal(map[string]any{DocumentKey: body})
	if err != nil {
		return nil, fmt.Errorf("read the receipt: %w", err)
	}
	payload, fields, err := signedContent(unsigned)
	if err != nil {
		return nil, fmt.Errorf("the file is not a receipt's JSON rendering: %w", err)
	}
	v.Fields = len(fields)

	block, header, ok := readBlock(v, sigRaw)
	if !ok {
		return v, nil
	}
	v.KeyID = header.Kid
	if t, err := time.Parse(time.RFC3339, header.SignedAt); err == nil {
		v.SignedAt = t
	}
	if block.Algorithm != header.Alg {
		v.fail(ProblemBlock, "signature.alg", "signature.alg is %q but the signature's protected header says %q", block.Algorithm, header.Alg)
	}
	if block.KeyID != header.Kid {
		v.fail(ProblemBlock, "signature.kid", "signature.kid is %q but the receipt was signed by key %q", block.KeyID, header.Kid)
	}
	if signedAt, err := time.Parse(time.RFC3339, header.SignedAt); err != nil || !block.SignedAt.Equal(signedAt) {
		v.fail(ProblemBlock, "signature.signed_at", "signature.signed_at is %s but the receipt was signed at %q", block.SignedAt.UTC().Format(time.RFC3339), header.SignedAt)
	}

	pub, known := keys[header.Kid]
	if !known {
		v.fail(ProblemKey, "signature.kid", "the receipt was signed by key %s, which is not among the trusted keys", header.Kid)
		return v, nil
	}
	if alg, err := AlgorithmOf(pub); err != nil || string(alg) != header.Alg {
		v.fail(ProblemKey, "signature.kid", "key %s does not sign with %s, the algorithm the signature names", header.Kid, header.Alg)
		return v, nil
	}
	v.Algorithm = ledger.SigningAlgorithm(header.Alg)
	obj, err := jose.ParseDetached(block.JWS, payload, []jose.SignatureAlgorithm{jose.EdDSA, jose.ES256})
	if err != nil {
		v.fail(ProblemBlock, "signature.jws", "signature.jws cannot be read as a detached JWS: %v", err)
		return v, nil
	}
	if err := obj.DetachedVerify(payload, pub); err != nil {
		v.fail(ProblemSignature, "signature.jws", "the signature does not match the receipt's content")
		v.Problems = append(v.Problems, fieldProblems(header.Fields, fields)...)
	}
	return v, nil
}

// readBlock reads the signature block and its JWS's protected header,
// recording in v why it cannot.
func readBlock(v *Verification, raw json.RawMessage) (*Signature, *signedHeader, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var block Signature
	if err := dec.Decode(&block); err != nil {
		v.fail(ProblemBlock, "signature", "the signature block cannot be read: %v", err)
		return nil, nil, false
	}
	parts := strings.Split(block.JWS, ".")
	if len(parts) != 3 || parts[1] != "" {
		v.fail(ProblemBlock, "signature.jws", "signature.jws is not a detached JWS (protected header, an empty payload and a signature, joined by dots)")
		return nil, nil, false
	}
	h, err := base64.RawURLEncoding.DecodeString(parts[0])
	var header signedHeader
	if err == nil {
		err = json.Unmarshal(h, &header)
	}
	if err != nil {
		v.fail(ProblemBlock, "signature.jws", "the protected header of signature.jws cannot be read: %v", err)
		return nil, nil, false
	}
	if !ledger.SigningAlgorithm(header.Alg).Known() {
		v.fail(ProblemBlock, "signature.jws", "the receipt was signed with algorithm %q; receipts are signed with %s or %s only", header.Alg, ledger.SigningEdDSA, ledger.SigningES256)
		return nil, nil, false
	}
	return &block, &header, true
}

// fieldProblems names the fields of the file whose digests differ from the
// signed ones (see digestSize for what they can and cannot prove). A list
// item missing or added as a whole (every field under lineage[2]) is named
// once, by the item.
func fieldProblems(signed, file map[string]string) []Problem {
	var changed, missing, added []string
	for _, p := range slices.Sorted(maps.Keys(signed)) {
		d, ok := file[p]
		switch {
		case !ok:
			missing = append(missing, p)
		case d != signed[p]:
			changed = append(changed, p)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(file)) {
		if _, ok := signed[p]; !ok {
			added = append(added, p)
		}
	}
	var out []Problem
	for _, p := range changed {
		out = append(out, Problem{Kind: ProblemField, Field: p, Message: p + " differs from what was signed"})
	}
	for _, p := range wholeItems(missing, file) {
		out = append(out, Problem{Kind: ProblemField, Field: p, Message: p + " was signed and is missing"})
	}
	for _, p := range wholeItems(added, signed) {
		out = append(out, Problem{Kind: ProblemField, Field: p, Message: p + " was not signed"})
	}
	return out
}

// wholeItems replaces the paths under a list item (lineage[2].at) by the
// item (lineage[2]) when other holds no path under it, keeping order.
func wholeItems(paths []string, other map[string]string) []string {
	var out []string
	for _, p := range paths {
		item := p
		if i := strings.LastIndex(p, "]"); i >= 0 {
			item = p[:i+1]
		}
		if item != p && hasUnder(other, item) {
			item = p
		}
		if len(out) == 0 || out[len(out)-1] != item {
			out = append(out, item)
		}
	}
	return out
}

func hasUnder(paths map[string]string, item string) bool {
	for p := range paths {
		if p == item || strings.HasPrefix(p, item+".") || strings.HasPrefix(p, item+"[") {
			return true
		}
	}
	return false
}
