package ledger

import (
	"encoding/json"

	"github.com/taskgate/taskgate/canon"
)

// Decide applies the acceptance table (docs/mcp-surface.md, "Acceptance") to what is
// stored for one (tenant, operation ID): nothing means created, the same
// fingerprint means attached, a different one means conflict. Denials are policy's to make
// before this table is consulted; Decide never returns [DecisionDenied].
func Decide(stored *Operation, fingerprint string) (Decision, string) {
	switch {
	case stored == nil:
		return DecisionCreated, ""
	case stored.Fingerprint == fingerprint:
		return DecisionAttached, ""
	default:
		return DecisionConflict, ReasonArgumentsDiffer
	}
}

// DecideKeyed is Decide for a call whose provider contract passes the
// provider's key in the argument keyArgument. The gateway leaves that
// argument out of the call's arguments and its fingerprint, since its
// value is the gateway's to choose; an operation accepted while it still
// counted stored the fingerprint of the value its client sent there (and
// keeps that value in its arguments). A call whose arguments, with that
// stored value put back, have the stored fingerprint is that operation's
// retry: attached, not a conflict. arguments are the call's, without
// keyArgument.
func DecideKeyed(stored *Operation, fingerprint string, arguments json.RawMessage, keyArgument string) (Decision, string) {
	d, reason := Decide(stored, fingerprint)
	if d != DecisionConflict || keyArgument == "" {
		return d, reason
	}
	var was map[string]json.RawMessage
	if json.Unmarshal(stored.Arguments, &was) != nil {
		return d, reason
	}
	value, ok := was[keyArgument]
	if !ok {
		return d, reason
	}
	now := map[string]json.RawMessage{}
	if len(arguments) > 0 && json.Unmarshal(arguments, &now) != nil {
		return d, reason
	}
	now[keyArgument] = value
	b, err := json.Marshal(now)
	if err != nil {
		return d, reason
	}
	if fp, err := canon.Compute(stored.Upstream, stored.Tool, b); err == nil && string(fp) == stored.Fingerprint {
		return DecisionAttached, ""
	}
	return d, reason
}
