package ledger

import "time"

// SecretsErasable decides whether an operation's secret argument values
// may be overwritten now. They are kept while any re-send could need them
// and while reconciliation may still call the provider with the
// arguments: an operation that has not ended (one in review may still be
// re-sent by a human) keeps them. An ended one gives them up once it is
// reconciled, or once its retention has passed whatever reconciliation
// still waits for.
func SecretsErasable(op *Operation, reconciled bool, now time.Time, retention time.Duration) bool {
	switch {
	case !op.SecretsAtRest.Held(), !op.State.Terminal():
		return false
	case reconciled:
		return true
	default:
		return !op.EndedAt.IsZero() && !now.Before(op.EndedAt.Add(retention))
	}
}
