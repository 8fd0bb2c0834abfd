package packet

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/taskgate/taskgate/receipt"
)

// PredicateType names what a signed review packet's in-toto statement
// asserts: a taskgate review packet, version 1 of its predicate's shape.
const PredicateType = "https://taskgate.dev/review-packet/v1"

// SubjectName is the name under which a signed packet lists the issued
// version of an operation's receipt: receipt/TENANT/OPERATION_ID/vN.
func SubjectName(tenant, operationID string, version int) string {
	return "receipt/" + tenant + "/" + operationID + "/v" + strconv.Itoa(version)
}

// Subjects lists the issued receipts p includes as a signed packet names
// them: by [SubjectName], with the digest of each one's stored envelope,
// in the packet's order.
func Subjects(p *Packet) []receipt.Subject {
	var out []receipt.Subject
	for _, o := range p.Operations {
		if !o.Provisional {
			out = append(out, receipt.Subject{Name: SubjectName(o.Tenant, o.OperationID, o.ReceiptVersion), SHA256: o.ReceiptDigest})
		}
	}
	return out
}

// Statement returns the RFC 8785 canonical JSON of p's in-toto Statement
// v1: predicateType [PredicateType], the predicate p's JSON rendering with
// the digest of every field, and as subjects the issued receipts p
// includes ([Subjects]). A provisional receipt is no subject, having no
// issued bytes to name; the predicate holds it, marked provisional. A
// packet of no issued receipt makes no statement: it would be about
// nothing. Statement is pure; signing it is an act of issuing, which is
// receipt/issue's.
func Statement(p *Packet) ([]byte, error) {
	subjects := Subjects(p)
	if len(subjects) == 0 {
		return nil, fmt.Errorf("the review packet includes no issued receipt, so a signed packet would be about nothing; issue the receipts first (taskgate receipt issue), or render the packet as md or json")
	}
	doc, err := p.JSON()
	if err != nil {
		return nil, err
	}
	var pred map[string]any
	if err := json.Unmarshal(doc, &pred); err != nil {
		return nil, fmt.Errorf("make the review packet's statement: %w", err)
	}
	st, err := receipt.Attest(PredicateType, DocumentKey, subjects, pred)
	if err != nil {
		return nil, fmt.Errorf("make the review packet's statement: %w", err)
	}
	return st, nil
}

// CheckReceipts compares the receipts a signed packet lists (its
// statement's subjects) with the receipts at hand: have maps each one's
// subject name to the lowercase hex SHA-256 of its bytes. It returns a
// [receipt.ProblemSubject] for each listed receipt at hand whose digest
// differs, each listed receipt not at hand and each receipt at hand the
// packet does not list, in that order, each naming the receipt.
func CheckReceipts(listed []receipt.Subject, have map[string]string) []receipt.Problem {
	var changed, missing, extra []receipt.Problem
	names := map[string]bool{}
	for _, s := range listed {
		names[s.Name] = true
		d, ok := have[s.Name]
		switch {
		case !ok:
			missing = append(missing, receipt.Problem{Kind: receipt.ProblemSubject, Field: s.Name,
				Message: fmt.Sprintf("the packet lists receipt %q (sha256 %s), and no such receipt was given or stored", s.Name, s.SHA256)})
		case d != s.SHA256:
			changed = append(changed, receipt.Problem{Kind: receipt.ProblemSubject, Field: s.Name,
				Message: fmt.Sprintf("receipt %q is not the one the packet lists: its sha256 is %s, the packet lists %s", s.Name, d, s.SHA256)})
		}
	}
	for _, n := range slices.Sorted(maps.Keys(have)) {
		if !names[n] {
			extra = append(extra, receipt.Problem{Kind: receipt.ProblemSubject, Field: n,
				Message: fmt.Sprintf("receipt %q was given, and the packet does not list it", n)})
		}
	}
	return slices.Concat(changed, missing, extra)
}
