package api

import (
	"errors"
	"net/http"
	"strings"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/receipt"
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
		writeError(w, badRequest("format", "format=%q is not a receipt format; use yaml, json or md", format))
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
	in, err := receipt.Load(r.Context(), a.store, op, &receipt.LoadOptions{Now: a.clock()})
	if err != nil {
		writeError(w, a.internal(r, "could not load the receipt", err))
		return
	}
	rc := receipt.Build(in)
	if _, err := a.signer.Sign(r.Context(), rc, in.Now); err != nil {
		writeError(w, a.internal(r, "could not sign the receipt", err))
		return
	}
	body, err := receipt.Render(rc, format)
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
