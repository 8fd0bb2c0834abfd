package console

import (
	"net/url"
	"strings"
	"testing"
)

func TestCheckFormTarget(t *testing.T) {
	for _, tc := range []struct {
		name string
		form url.Values
		kind formKind
		id   string
		say  string // empty: accepted
	}{
		{"operation", url.Values{"kind": {"operation"}, "operation_id": {"op-1"}}, formOperation, "op-1", ""},
		{"request", url.Values{"kind": {"approval_request"}, "id": {"7"}}, formApprovalRequest, "7", ""},
		{"escaped ID as stored", url.Values{"kind": {"operation"}, "operation_id": {"../requests/1/approve?x="}}, formOperation, "../requests/1/approve?x=", ""},
		{"no kind", url.Values{"operation_id": {"op-1"}}, formOperation, "op-1", `does not say it acts on an operation (its kind is "")`},
		{"operation's form at a request", url.Values{"kind": {"operation"}, "operation_id": {"../requests/1/approve?x="}, "id": {"1"}}, formApprovalRequest, "1",
			`does not say it acts on an approval request (its kind is "operation")`},
		{"request's form at an operation", url.Values{"kind": {"approval_request"}, "id": {"1"}}, formOperation, "op-1", "does not say it acts on an operation"},
		{"another request", url.Values{"kind": {"approval_request"}, "id": {"2"}}, formApprovalRequest, "1", `acts on approval request "2" but was sent to the address of approval request "1"`},
		{"no request ID", url.Values{"kind": {"approval_request"}}, formApprovalRequest, "1", `acts on approval request ""`},
		{"another operation", url.Values{"kind": {"operation"}, "operation_id": {"op-2"}}, formOperation, "op-1", `acts on operation "op-2" but was sent to the address of operation "op-1"`},
		{"bidi in the form", url.Values{"kind": {"operation"}, "operation_id": {"op-\u202e1"}}, formOperation, "op-1", `"op-\u202e1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkFormTarget(tc.form, tc.kind, tc.id)
			switch {
			case tc.say == "" && err != nil:
				t.Fatalf("checkFormTarget = %v, want nil", err)
			case tc.say != "" && (err == nil || !strings.Contains(err.Error(), tc.say) || !strings.Contains(err.Error(), "reload")):
				t.Fatalf("checkFormTarget = %v; want it to say %q and to reload", err, tc.say)
			}
		})
	}
}
