package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/receipt/issue"
	"github.com/taskgate/taskgate/signingkeys"
)

// envelopeType is the media type of a DSSE envelope, as the REST API
// serves it.
const envelopeType = "application/vnd.dsse.envelope.v1+json"

// receiptData is an operation's receipt page: one issued version of its
// receipt (the latest unless the page asks for another), or the
// provisional receipt while none is issued, with how the version was
// signed and every version issued.
type receiptData struct {
	Receipt *receipt.Receipt
	// Shown is the version on the page; nil for a provisional receipt.
	Shown *ledger.ReceiptVersion
	// Latest is the newest version's number; zero when none is issued.
	Latest int
	// Algorithm is what the signing key signs with, as the ledger records
	// it; empty when the ledger no longer holds the key.
	Algorithm string
	// Check is the shown version's signature checked against the ledger's
	// public keys; nil for a provisional receipt.
	Check *receipt.Verification
	// Versions are the issued versions, newest first.
	Versions []*ledger.ReceiptVersion
}

// version reads the ?version= a receipt page or download asks for; zero
// means the latest.
func version(r *http.Request) (int, error) {
	raw := r.URL.Query().Get("version")
	if raw == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("version %q is not a receipt version: give a whole number from 1, or none for the latest", raw)
	}
	return n, nil
}

// pick is version n of versions (oldest first), or the latest when n is
// zero; nil when there is no such version.
func pick(versions []*ledger.ReceiptVersion, n int) *ledger.ReceiptVersion {
	if n == 0 && len(versions) > 0 {
		return versions[len(versions)-1]
	}
	for _, v := range versions {
		if v.Version == n {
			return v
		}
	}
	return nil
}

// receiptOf is the operation whose receipt r asks for and the version it
// names (zero for the latest); ok is false once the failure is answered.
func (c *Console) receiptOf(w http.ResponseWriter, r *http.Request) (*ledger.Operation, int, bool) {
	op, ok := c.findOperation(w, r)
	if !ok {
		return nil, 0, false
	}
	n, err := version(r)
	if err != nil {
		c.fail(w, r, nil, http.StatusBadRequest, err.Error())
		return nil, 0, false
	}
	return op, n, true
}

func (c *Console) receiptPage(w http.ResponseWriter, r *http.Request) {
	op, n, ok := c.receiptOf(w, r)
	if !ok {
		return
	}
	rd, err := issue.Read(r.Context(), c.store, op, &receipt.LoadOptions{Now: c.clock()})
	if err != nil {
		c.fail(w, r, err, http.StatusInternalServerError, "could not load the operation's receipt; the gateway log has the details, try again shortly")
		return
	}
	d := receiptData{Receipt: rd.Receipt, Versions: slices.Clone(rd.Versions)}
	slices.Reverse(d.Versions)
	if latest := rd.Latest(); latest != nil {
		d.Latest = latest.Version
		v := pick(rd.Versions, n)
		if v == nil {
			c.fail(w, r, nil, http.StatusNotFound, fmt.Sprintf("the receipt of operation %s has no version %d; its versions run from 1 to %d", visibleText(op.OperationID), n, d.Latest))
			return
		}
		if v != latest {
			if d.Receipt, err = receipt.Issued(v.Document, v.KeyID); err != nil {
				c.fail(w, r, err, http.StatusInternalServerError, fmt.Sprintf("could not read version %d of the receipt; the gateway log has the details", v.Version))
				return
			}
			d.Receipt.Issue.IssuedAt = v.IssuedAt.UTC()
		}
		d.Shown = v
		keys, err := c.store.SigningKeyList(r.Context())
		if err != nil {
			c.fail(w, r, err, http.StatusInternalServerError, "could not read the receipt-signing keys; the gateway log has the details, try again shortly")
			return
		}
		if i := slices.IndexFunc(keys, func(k *ledger.SigningKey) bool { return k.KeyID == v.KeyID }); i >= 0 {
			d.Algorithm = string(keys[i].Algorithm)
		}
		if d.Check, err = receipt.VerifyEnvelope(r.Context(), v.Document, signingkeys.PublicKeys(keys)); err != nil {
			c.fail(w, r, err, http.StatusInternalServerError, fmt.Sprintf("could not read version %d of the receipt; the gateway log has the details", v.Version))
			return
		}
	} else if n != 0 {
		c.fail(w, r, nil, http.StatusNotFound, fmt.Sprintf("the receipt of operation %s is not issued yet, so it has no version %d; the page without ?version= shows it, marked provisional", visibleText(op.OperationID), n))
		return
	}
	p := &page{Title: "Receipt of " + visibleText(op.OperationID), Data: d}
	// A provisional receipt of a running operation changes as it runs;
	// the page has no form to lose.
	if d.Shown == nil && !op.State.Terminal() {
		p.Refresh = refreshSeconds
	}
	c.render(w, r, "receipt", http.StatusOK, p)
}

// receiptEnvelope serves an issued version of the receipt, the DSSE
// envelope byte for byte as stored, as a download.
func (c *Console) receiptEnvelope(w http.ResponseWriter, r *http.Request) {
	op, n, ok := c.receiptOf(w, r)
	if !ok {
		return
	}
	versions, err := c.store.ReceiptVersions(r.Context(), op.ID)
	if err != nil {
		c.fail(w, r, err, http.StatusInternalServerError, "could not load the operation's receipt; the gateway log has the details, try again shortly")
		return
	}
	if len(versions) == 0 {
		c.fail(w, r, nil, http.StatusConflict, fmt.Sprintf("the receipt of operation %s is not issued yet (the operation is still open, or no signing key could sign it), so it has no DSSE envelope to download", visibleText(op.OperationID)))
		return
	}
	v := pick(versions, n)
	if v == nil {
		c.fail(w, r, nil, http.StatusNotFound, fmt.Sprintf("the receipt of operation %s has no version %d; its versions run from 1 to %d", visibleText(op.OperationID), n, versions[len(versions)-1].Version))
		return
	}
	h := w.Header()
	h.Set("Content-Type", envelopeType)
	// The name is the gateway's own (version and digest), never the
	// operation ID, which an agent chose.
	h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="receipt-v%d-%.12s.dsse.json"`, v.Version, v.Digest))
	w.Write(v.Document)
}

// jsonText is a provider's answer as the page shows it: indented when it
// is JSON, as it is otherwise, for [visible] to make inert.
func jsonText(s string) string {
	var b bytes.Buffer
	if json.Indent(&b, []byte(s), "", "  ") != nil {
		return s
	}
	return b.String()
}
