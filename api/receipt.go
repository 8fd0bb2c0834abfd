package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/receipt/issue"
)

// receiptContentType is the media type of each receipt format, and whether
// the format exists.
func receiptContentType(format string) (string, bool) {
	switch strings.ToLower(format) {
	case "yaml", "yml":
		return "application/yaml", true
	case "json":
		return "application/json", true
	case "md", "markdown":
		return "text/markdown; charset=utf-8", true
	case issue.FormatDSSE:
		// The DSSE envelope, as its specification names it.
		return "application/vnd.dsse.envelope.v1+json", true
	case issue.FormatSigstoreBundle:
		return receipt.BundleMediaType, true
	}
	return "", false
}

func (a *API) getReceipt(w http.ResponseWriter, r *http.Request) {
	tenant, aerr := tenant(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	format := r.URL.Query().Get("format")
	if format == "" {
		format = "yaml"
	}
	contentType, ok := receiptContentType(format)
	if !ok {
		writeError(w, badRequest("format", "format=%q is not a receipt format; use yaml, json, md, dsse or sigstore-bundle", format))
		return
	}
	id := r.PathValue("id")
	op, err := a.operation(r, tenant, id)
	if errors.Is(err, ledger.ErrNotFound) {
		writeError(w, notFound("no operation or task %q", id))
		return
	}
	if err != nil {
		writeError(w, a.internal(r, "could not load the operation", err))
		return
	}
	// The issued receipt as stored; a provisional one while none is.
	rd, err := issue.Read(r.Context(), a.store, op, &receipt.LoadOptions{Now: a.clock()})
	if err != nil {
		writeError(w, a.internal(r, "could not load the receipt", err))
		return
	}
	// Both signed forms are of an issued version; a provisional receipt
	// has neither.
	signed := strings.EqualFold(format, issue.FormatDSSE) || strings.EqualFold(format, issue.FormatSigstoreBundle)
	if rd.Latest() == nil && signed {
		writeError(w, &apiError{status: http.StatusConflict, code: CodeConflict, message: fmt.Sprintf(
			"the receipt of operation %q is not issued yet (the operation is still open, or no signing key could sign it), so it has no %s form; ask for format=json, marked provisional", op.OperationID, strings.ToLower(format))})
		return
	}
	body, err := rd.Render(format)
	if err != nil {
		writeError(w, a.internal(r, "could not render the receipt", err))
		return
	}
	header(w, contentType)
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}

// operation finds the tenant's operation by operation ID, or failing that
// by task ID; another tenant's is ErrNotFound like a missing one.
func (a *API) operation(r *http.Request, tenant, id string) (*ledger.Operation, error) {
	op, err := a.store.OperationGet(r.Context(), &ledger.OperationGetParams{Tenant: tenant, OperationID: id})
	if !errors.Is(err, ledger.ErrNotFound) {
		return op, err
	}
	return a.store.OperationGet(r.Context(), &ledger.OperationGetParams{Tenant: tenant, TaskID: id})
}
