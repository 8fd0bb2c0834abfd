// Package issue issues operations' receipts and reads them back. When an
// operation's receipt is a final assessment ([receipt.Final]) [Issuer.Issue]
// builds it from the ledger, makes it an in-toto statement, signs it with
// the active receipt-signing key as a DSSE envelope and stores that
// document as the operation's next receipt version, naming the one before
// by digest; it issues nothing while the receipt says what the latest
// version says. [Read] returns the stored document as it was issued, and
// needs no key; an operation without an issued receipt gets a provisional
// one, built from the ledger and unsigned. [Issuer.SignPacket] signs a
// review packet, a statement over the digests of the issued receipts it
// includes, with the same key.
//
// This package must never call a provider, and never change the ledger
// but by adding receipt versions.
package issue

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/packet"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/secrets"
	"github.com/taskgate/taskgate/signingkeys"
)

// Issuer issues receipts into one ledger with its active signing key.
type Issuer struct {
	store  ledger.Store
	signer *signingkeys.Signer
}

// New returns an Issuer over store, opening signing keys with ring (nil
// when no secrets key is configured: an active key then cannot sign, and
// Issue says so).
func New(store ledger.Store, ring *secrets.Ring) *Issuer {
	return &Issuer{store: store, signer: signingkeys.NewSigner(store, ring)}
}

// Outcome says what [Issuer.Issue] did.
type Outcome string

const (
	// Issued: a new version was stored.
	Issued Outcome = "issued"
	// Unchanged: the latest version says what the receipt says now.
	Unchanged Outcome = "unchanged"
	// Open: the receipt is not a final assessment yet.
	Open Outcome = "open"
	// NoKey: the ledger has no active signing key, so nothing was signed.
	NoKey Outcome = "no_key"
)

// Result is what [Issuer.Issue] did, and the version it stored or found.
type Result struct {
	Outcome Outcome
	// Version is the version stored (Issued) or the latest one
	// (Unchanged); nil otherwise.
	Version *ledger.ReceiptVersion
}

// Issue builds op's receipt as the ledger stands and, when it is a final
// assessment whose substance differs from the latest version's, signs and
// stores it as the next version, issued at opts.Now (zero: the clock).
// Of two issues racing for one version one stores it; the other finds the
// receipt unchanged, or issues the version after.
func (i *Issuer) Issue(ctx context.Context, op *ledger.Operation, opts *receipt.LoadOptions) (*Result, error) {
	for range 3 {
		res, err := i.issueOnce(ctx, op, opts)
		if !errors.Is(err, ledger.ErrReceiptVersionTaken) {
			return res, err
		}
	}
	return nil, fmt.Errorf("issue the receipt of operation %q: other issues kept taking its next version; run taskgate reconcile again", op.OperationID)
}

func (i *Issuer) issueOnce(ctx context.Context, op *ledger.Operation, opts *receipt.LoadOptions) (*Result, error) {
	in, err := receipt.Load(ctx, i.store, op, opts)
	if err != nil {
		return nil, err
	}
	r := receipt.Build(in)
	if !receipt.Final(r) {
		return &Result{Outcome: Open}, nil
	}
	substance, err := receipt.Substance(r)
	if err != nil {
		return nil, err
	}
	versions, err := i.store.ReceiptVersions(ctx, op.ID)
	if err != nil {
		return nil, fmt.Errorf("read the issued receipts of operation %q: %w", op.OperationID, err)
	}
	next := receipt.Issue{Version: 1}
	if n := len(versions); n > 0 {
		latest := versions[n-1]
		if latest.Substance == substance {
			return &Result{Outcome: Unchanged, Version: latest}, nil
		}
		next = receipt.Issue{Version: latest.Version + 1, Previous: latest.Digest}
	}
	st, err := receipt.Statement(r, next)
	if err != nil {
		return nil, err
	}
	doc, kid, err := i.signer.Envelope(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("issue the receipt of operation %q: %w", op.OperationID, err)
	}
	if doc == nil {
		return &Result{Outcome: NoKey}, nil
	}
	v, err := i.store.ReceiptIssue(ctx, &ledger.ReceiptVersion{
		OperationRef: op.ID, Version: next.Version, Digest: receipt.Digest(doc), Previous: next.Previous,
		Substance: substance, KeyID: kid, Document: doc, IssuedAt: in.Now,
	})
	if err != nil {
		return nil, err
	}
	return &Result{Outcome: Issued, Version: v}, nil
}

// Reading is an operation's receipt as a reader gets it: the latest issued
// version, or, when none was issued, a provisional receipt.
type Reading struct {
	// Versions are every issued version, oldest first; the last is the
	// one a reader gets.
	Versions []*ledger.ReceiptVersion
	// Receipt is the latest version's receipt with its issue line, or
	// the provisional receipt.
	Receipt *receipt.Receipt
}

// Latest is the version a reader gets; nil when none was issued.
func (r *Reading) Latest() *ledger.ReceiptVersion {
	if len(r.Versions) == 0 {
		return nil
	}
	return r.Versions[len(r.Versions)-1]
}

// Read returns op's receipt as issued, or provisional when no version was
// issued: built from the ledger with opts (nil: now) and unsigned. It only
// reads, and needs no key.
func Read(ctx context.Context, store ledger.Store, op *ledger.Operation, opts *receipt.LoadOptions) (*Reading, error) {
	versions, err := store.ReceiptVersions(ctx, op.ID)
	if err != nil {
		return nil, fmt.Errorf("read the issued receipts of operation %q: %w", op.OperationID, err)
	}
	out := &Reading{Versions: versions}
	if v := out.Latest(); v != nil {
		r, err := receipt.Issued(v.Document, v.KeyID)
		if err != nil {
			return nil, fmt.Errorf("read version %d of the receipt of operation %q: %w", v.Version, op.OperationID, err)
		}
		r.Issue.IssuedAt = v.IssuedAt.UTC()
		out.Receipt = r
		return out, nil
	}
	in, err := receipt.Load(ctx, store, op, opts)
	if err != nil {
		return nil, err
	}
	out.Receipt = receipt.Build(in)
	out.Receipt.Provisional = true
	return out, nil
}

// Formats a reading renders in: the receipt's renderings and the issued
// document itself, alone or in a Sigstore bundle.
var Formats = []string{"yaml", "json", "md", FormatDSSE, FormatSigstoreBundle}

const (
	// FormatDSSE is the issued document: the DSSE envelope as stored.
	FormatDSSE = "dsse"
	// FormatSigstoreBundle is the issued document in a Sigstore bundle
	// v0.3 whose verification material names the signing key
	// ([receipt.Bundle]).
	FormatSigstoreBundle = "sigstore-bundle"
)

// Render renders the reading in format (one of [Formats]). The DSSE form is
// the stored document byte for byte, and the bundle wraps it; a
// provisional receipt has neither.
func (r *Reading) Render(format string) ([]byte, error) {
	dsse, bundle := strings.EqualFold(format, FormatDSSE), strings.EqualFold(format, FormatSigstoreBundle)
	if !dsse && !bundle {
		return receipt.Render(r.Receipt, format)
	}
	v := r.Latest()
	if v == nil {
		return nil, fmt.Errorf("the receipt of operation %q is not issued yet (the operation is still open, or no signing key could sign it), so it has no %s form; read it as yaml, json or md, marked provisional", r.Receipt.OperationID, strings.ToLower(format))
	}
	if bundle {
		return receipt.Bundle(v.Document, v.KeyID)
	}
	return v.Document, nil
}

// SignPacket signs p's statement ([packet.Statement]) with the active
// signing key as a DSSE envelope and returns it with the key's ID: signing
// a packet issues it, as signing a receipt does, so it takes the key a
// receipt takes. It stores nothing, and fails when the ledger has no
// active key or the packet includes no issued receipt.
func (i *Issuer) SignPacket(ctx context.Context, p *packet.Packet) ([]byte, string, error) {
	st, err := packet.Statement(p)
	if err != nil {
		return nil, "", err
	}
	doc, kid, err := i.signer.Envelope(ctx, st)
	if err != nil {
		return nil, "", fmt.Errorf("sign the review packet: %w", err)
	}
	if doc == nil {
		return nil, "", ErrNoKey
	}
	return doc, kid, nil
}

// ErrNoKey is why SignPacket signed nothing: the ledger has no active
// signing key.
var ErrNoKey = errors.New("the ledger has no active signing key, so nothing can sign the review packet; create one with taskgate signing-keys create")
