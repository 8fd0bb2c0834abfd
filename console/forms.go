package console

import (
	"fmt"
	"net/url"
)

// formKind names the kind of object a console form acts on. Every form
// that changes something carries its kind and its object's ID as hidden
// fields, and its handler acts only when they name the object its path
// names: a form whose path was steered elsewhere (by an ID that climbed
// out of its path segment, say) is refused rather than obeyed.
type formKind string

const (
	formOperation       formKind = "operation"
	formApprovalRequest formKind = "approval_request"
	// formBudget names a budget; the form that creates one names "new".
	formBudget formKind = "budget"
)

// formKindField is the form field that carries the form's kind.
const formKindField = "kind"

// idField is the form field that carries the ID of the object.
func (k formKind) idField() string {
	if k == formOperation {
		return "operation_id"
	}
	return "id"
}

// noun is the kind as a sentence names it.
func (k formKind) noun() string {
	switch k {
	case formOperation:
		return "operation"
	case formBudget:
		return "budget"
	}
	return "approval request"
}

// checkFormTarget reports whether form says it acts on the object of kind
// with id, the one its path named; the error says what to do instead.
func checkFormTarget(form url.Values, kind formKind, id string) error {
	got := formKind(form.Get(formKindField))
	if got != kind {
		return fmt.Errorf("this form does not say it acts on an %s (its %s is %q), so it was not sent from that %s's page and nothing was done; reload the page and use the form shown with the %s",
			kind.noun(), formKindField, got, kind.noun(), kind.noun())
	}
	if gotID := form.Get(kind.idField()); gotID != id {
		return fmt.Errorf("this form acts on %s %q but was sent to the address of %s %q, so nothing was done; reload the page and use the form shown with the %s you mean",
			kind.noun(), gotID, kind.noun(), id, kind.noun())
	}
	return nil
}
