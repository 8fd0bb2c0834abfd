package receipt

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"

	"github.com/taskgate/taskgate/canon"
)

// PredicateType names what an issued receipt's in-toto statement asserts:
// a taskgate receipt, version 1 of its predicate's shape. cosign's
// verify-blob-attestation --type takes it as it is.
const PredicateType = "https://taskgate.dev/receipt/v1"

// PayloadType is the DSSE payload type of an in-toto statement.
const PayloadType = "application/vnd.in-toto+json"

// Predicate keys beside the receipt itself (under DocumentKey).
const (
	// predicateVersion is the issued version's number, from 1.
	predicateVersion = "version"
	// predicatePrevious is the digest of the version before, absent on
	// version 1.
	predicatePrevious = "previous"
	// predicateFields maps the path of every signed field to its digest,
	// by which a verifier names what was changed (see digestSize).
	predicateFields = "field_digests"
)

// Subject names in an issued receipt's statement.
const (
	// SubjectChainHead is the subject whose SHA-256 is the head of the
	// operation's event hash chain the receipt was built from.
	SubjectChainHead = "chain_head"
)

// Issue is what makes a receipt one issued version of an operation's
// receipt, beside the receipt itself.
type Issue struct {
	// Version counts from 1.
	Version int
	// Previous is the digest (lowercase hex SHA-256 of the signed
	// document) of version Version-1; empty for version 1.
	Previous string
}

var hexDigest = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Statement returns the RFC 8785 canonical JSON of r's in-toto Statement v1
// as issue's version: predicateType [PredicateType], the predicate r's
// JSON rendering (without a signature block) with the version, the
// previous version's digest and the digests of the signed fields, and as
// subject the operation's chain head. It is pure: the same receipt and
// issue always give the same bytes. A receipt without a chain head cannot
// be issued: the statement would be about nothing.
func Statement(r *Receipt, issue Issue) ([]byte, error) {
	if !hexDigest.MatchString(r.ChainHead) {
		return nil, fmt.Errorf("issue the receipt of %q: its chain head %q is not a hex SHA-256; the operation's events predate the ledger's hash chains", r.OperationID, r.ChainHead)
	}
	if issue.Version < 1 || (issue.Version == 1) != (issue.Previous == "") {
		return nil, fmt.Errorf("issue the receipt of %q: version %d with previous %q; every version from 2 names the one before", r.OperationID, issue.Version, issue.Previous)
	}
	c := *r
	c.Signature, c.Issue, c.Provisional = nil, nil, false
	doc, err := c.JSON()
	if err != nil {
		return nil, err
	}
	var pred map[string]any
	if err := json.Unmarshal(doc, &pred); err != nil {
		return nil, fmt.Errorf("issue the receipt of %q: %w", r.OperationID, err)
	}
	pred[predicateVersion] = issue.Version
	if issue.Previous != "" {
		pred[predicatePrevious] = map[string]string{"sha256": issue.Previous}
	}
	st, err := Attest(PredicateType, DocumentKey, []Subject{{Name: SubjectChainHead, SHA256: r.ChainHead}}, pred)
	if err != nil {
		return nil, fmt.Errorf("issue the receipt of %q: %w", r.OperationID, err)
	}
	return st, nil
}

// Substance returns the lowercase hex SHA-256 of what r says, apart from
// when it was built (generated_at), the chain head and the latest
// reconciler pass, which move with every pass whatever it finds: a later
// fact that changes the receipt changes its substance; a pass that finds
// nothing new does not.
func Substance(r *Receipt) (string, error) {
	c := *r
	c.GeneratedAt, c.ChainHead, c.LastReconciliation = time.Time{}, "", nil
	c.Signature, c.Issue, c.Provisional = nil, nil, false
	doc, err := c.JSON()
	if err != nil {
		return "", err
	}
	cn, err := canon.Canonicalize(doc)
	if err != nil {
		return "", fmt.Errorf("canonicalise the receipt of %q: %w", r.OperationID, err)
	}
	sum := sha256.Sum256(cn)
	return hex.EncodeToString(sum[:]), nil
}

// Digest is the lowercase hex SHA-256 of an issued document, by which the
// next version names it.
func Digest(doc []byte) string {
	sum := sha256.Sum256(doc)
	return hex.EncodeToString(sum[:])
}

// Envelope signs statement with key, whose key ID is kid, as a DSSE
// envelope (payload type [PayloadType]) and returns it as JSON. Ed25519
// keys sign the pre-authentication encoding itself; ECDSA keys its
// SHA-256, as cosign verifies it.
func Envelope(ctx context.Context, statement []byte, key crypto.Signer, kid string) ([]byte, error) {
	signer, err := dsse.NewEnvelopeSigner(&dsseSigner{key: key, kid: kid})
	if err != nil {
		return nil, err
	}
	env, err := signer.SignPayload(ctx, PayloadType, statement)
	if err != nil {
		return nil, fmt.Errorf("sign the receipt's statement with key %s: %w", kid, err)
	}
	b, err := json.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("encode the receipt's envelope: %w", err)
	}
	return append(b, '\n'), nil
}

// dsseSigner signs DSSE's pre-authentication encoding with a private key.
type dsseSigner struct {
	key crypto.Signer
	kid string
}

func (s *dsseSigner) KeyID() (string, error) { return s.kid, nil }

func (s *dsseSigner) Sign(_ context.Context, data []byte) ([]byte, error) {
	if _, ok := s.key.(ed25519.PrivateKey); ok {
		return s.key.Sign(rand.Reader, data, crypto.Hash(0))
	}
	sum := sha256.Sum256(data)
	return s.key.Sign(rand.Reader, sum[:], crypto.SHA256)
}

// dsseVerifier checks a signature over DSSE's pre-authentication encoding
// with one trusted public key.
type dsseVerifier struct {
	pub crypto.PublicKey
	kid string
}

func (v *dsseVerifier) KeyID() (string, error)   { return v.kid, nil }
func (v *dsseVerifier) Public() crypto.PublicKey { return v.pub }

var errBadSignature = errors.New("the signature does not match")

// Verify takes an ECDSA signature in ASN.1 DER, as cosign writes and
// reads it.
func (v *dsseVerifier) Verify(_ context.Context, data, sig []byte) error {
	var ok bool
	switch pub := v.pub.(type) {
	case ed25519.PublicKey:
		ok = ed25519.Verify(pub, data, sig)
	case *ecdsa.PublicKey:
		sum := sha256.Sum256(data)
		ok = ecdsa.VerifyASN1(pub, sum[:], sig)
	default:
		return fmt.Errorf("key %s is neither an Ed25519 nor an ECDSA public key", v.kid)
	}
	if !ok {
		return errBadSignature
	}
	return nil
}

// IsEnvelope reports whether doc looks like a DSSE envelope rather than a
// receipt's JSON rendering: a JSON object with a payloadType.
func IsEnvelope(doc []byte) bool {
	var probe struct {
		PayloadType *string `json:"payloadType"`
	}
	return json.Unmarshal(bytes.TrimSpace(doc), &probe) == nil && probe.PayloadType != nil
}
