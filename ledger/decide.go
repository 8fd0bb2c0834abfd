package ledger

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
