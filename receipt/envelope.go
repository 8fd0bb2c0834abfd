package receipt

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"google.golang.org/protobuf/encoding/protojson"
)

// readEnvelope reads a DSSE envelope and its in-toto statement of a
// taskgate receipt, refusing what is neither.
func readEnvelope(doc []byte) (*dsse.Envelope, []byte, *statementView, error) {
	env, payload, view, err := readStatement(doc)
	if err != nil {
		return nil, nil, nil, err
	}
	if view.PredicateType != PredicateType {
		return nil, nil, nil, fmt.Errorf("the statement's predicateType is %q, not a taskgate receipt (%s)", view.PredicateType, PredicateType)
	}
	return env, payload, view, nil
}

// readStatement reads a DSSE envelope and its in-toto statement, of any
// predicate type, refusing what is neither.
func readStatement(doc []byte) (*dsse.Envelope, []byte, *statementView, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	var env dsse.Envelope
	if err := dec.Decode(&env); err != nil {
		return nil, nil, nil, fmt.Errorf("the file is not a DSSE envelope: %w", err)
	}
	if env.PayloadType != PayloadType {
		return nil, nil, nil, fmt.Errorf("the envelope's payloadType is %q, not an in-toto statement (%s)", env.PayloadType, PayloadType)
	}
	payload, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("the envelope's payload is not base64: %w", err)
	}
	var st intoto.Statement
	if err := protojson.Unmarshal(payload, &st); err != nil {
		return nil, nil, nil, fmt.Errorf("the envelope's payload is not an in-toto statement: %w", err)
	}
	if err := st.Validate(); err != nil {
		return nil, nil, nil, fmt.Errorf("the envelope's payload is not a valid in-toto statement: %w", err)
	}
	var view statementView
	if err := json.Unmarshal(payload, &view); err != nil {
		return nil, nil, nil, fmt.Errorf("read the statement: %w", err)
	}
	return &env, payload, &view, nil
}

// statementView is a statement as this package reads it back: the subjects
// and the predicate's parts as the JSON they are.
type statementView struct {
	PredicateType string                     `json:"predicateType"`
	Subject       json.RawMessage            `json:"subject"`
	Predicate     map[string]json.RawMessage `json:"predicate"`
}

// receipt returns the receipt the predicate holds.
func (s *statementView) receipt() (*Receipt, error) {
	var r Receipt
	if err := json.Unmarshal(s.Predicate[DocumentKey], &r); err != nil {
		return nil, fmt.Errorf("the statement's predicate holds no readable %s: %w", DocumentKey, err)
	}
	return &r, nil
}

// issue returns the version and the previous digest the predicate holds.
func (s *statementView) issue() Issue {
	var is Issue
	_ = json.Unmarshal(s.Predicate[predicateVersion], &is.Version)
	var prev map[string]string
	if json.Unmarshal(s.Predicate[predicatePrevious], &prev) == nil {
		is.Previous = prev["sha256"]
	}
	return is
}

// Issued reads the receipt back from an issued document (a DSSE envelope
// as [Envelope] wrote it), with the issue line a rendering shows. It
// checks the document's shape, not its signature: it is for rendering a
// version the ledger stored; [VerifyEnvelope] is for a file from anyone.
func Issued(doc []byte, kid string) (*Receipt, error) {
	_, _, view, err := readEnvelope(doc)
	if err != nil {
		return nil, err
	}
	r, err := view.receipt()
	if err != nil {
		return nil, err
	}
	is := view.issue()
	r.Issue = &IssueLine{Version: is.Version, Digest: Digest(doc), Previous: is.Previous, KeyID: kid}
	return r, nil
}

// VerifyEnvelope checks an issued receipt, a DSSE envelope over its in-toto
// statement: that a signature is by a trusted key and matches, and, when
// none does, which fields differ from what was signed, by the digests the
// statement carries. It fails only when doc is not an envelope over a
// taskgate receipt statement at all. It reads no clock and no key store.
func VerifyEnvelope(ctx context.Context, doc []byte, keys PublicKeys) (*Verification, error) {
	env, _, view, err := readEnvelope(doc)
	if err != nil {
		return nil, err
	}
	r, err := view.receipt()
	if err != nil {
		return nil, err
	}
	is := view.issue()
	v := &Verification{Form: FormDSSE, OperationID: r.OperationID, ChainHead: r.ChainHead, Version: is.Version, Previous: is.Previous}
	if err := verifySignatures(ctx, env, view, DocumentKey, "the receipt", keys, v); err != nil {
		return nil, err
	}
	return v, nil
}

// VerifySigned checks that doc, a DSSE envelope of payload type
// [PayloadType] over any in-toto statement (an archive's checkpoint, say),
// is signed by one of keys, and returns its payload and the key that
// signed it. Unlike [VerifyEnvelope] it does not read the statement.
func VerifySigned(ctx context.Context, doc []byte, keys PublicKeys) ([]byte, string, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	var env dsse.Envelope
	if err := dec.Decode(&env); err != nil {
		return nil, "", fmt.Errorf("the file is not a DSSE envelope: %w", err)
	}
	if env.PayloadType != PayloadType {
		return nil, "", fmt.Errorf("the envelope's payloadType is %q, not an in-toto statement (%s)", env.PayloadType, PayloadType)
	}
	var trusted []dsse.Verifier
	for _, s := range env.Signatures {
		if pub, ok := keys[s.KeyID]; ok {
			trusted = append(trusted, &dsseVerifier{pub: pub, kid: s.KeyID})
		}
	}
	if len(trusted) == 0 {
		if len(env.Signatures) == 0 {
			return nil, "", errors.New("the envelope carries no signature")
		}
		return nil, "", fmt.Errorf("it was signed by key %s, which is not among the trusted keys", env.Signatures[0].KeyID)
	}
	ev, err := dsse.NewEnvelopeVerifier(trusted...)
	if err != nil {
		return nil, "", err
	}
	accepted, err := ev.Verify(ctx, &env)
	if err != nil || len(accepted) == 0 {
		return nil, "", errors.New("the signature does not match the signed statement")
	}
	payload, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		return nil, "", fmt.Errorf("the envelope's payload is not base64: %w", err)
	}
	return payload, accepted[0].KeyID, nil
}
