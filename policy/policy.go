// Package policy holds taskgate's pure decisions about approvals and spend:
// whether an approval admits a call's route (the remote jobs it would start
// and their estimated total), what
// an approval's reservations commit, whether a final cost breaches the
// approval's ceiling, and which retry policy applies. Every function here is
// a function of its arguments; the package must never read a clock, a
// database or the network, so that each rule can be tested as a table.
package policy

import (
	"fmt"
	"time"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
)

// Usage is what an approval has already committed: spend held or settled by
// reservations, and remote jobs reserved or started.
type Usage struct {
	Spend      money.Amount
	RemoteJobs int
	// Uncounted lists the reservations whose amounts could not be added to
	// Spend: another currency than the approval's, or a sum out of range.
	// A ceiling with uncounted spend cannot be checked.
	Uncounted []int64
}

// Verdict is the outcome of [Admit].
type Verdict struct {
	Allowed bool
	// Reason is one of ledger's Reason constants when not allowed.
	Reason string
	// Message says what happened and what to do, for a human or a model.
	Message string
}

// Route is what one call would start, priced before it is sent: the
// remote jobs it fans out to (one for most tools) and their estimated total.
type Route struct {
	RemoteJobs int
	Estimate   money.Amount
}

// jobs is the route's remote jobs; a route that names none starts one.
func (r Route) jobs() int { return max(r.RemoteJobs, 1) }

// Admit decides whether approval a admits route for tool, given what it has
// already committed: the route's remote jobs against the job limit and its
// estimate against the ceiling, all of it or nothing. retry is true when
// the request carries a new operation ID but repeats the arguments of an
// operation already running under a: such a request is a retry, and when it
// would exceed the remote-job limit it is denied as one.
func Admit(a *ledger.Approval, tool string, used Usage, route Route, retry bool, now time.Time) Verdict {
	switch {
	case a == nil:
		return deny(ledger.ReasonApprovalRequired,
			"this tool needs an approval for the operation ID before it runs; ask the user to approve it (taskgate approve) and retry with the same operation ID")
	case !a.RevokedAt.IsZero():
		return deny(ledger.ReasonApprovalExpired,
			fmt.Sprintf("approval %d for operation %q was revoked; ask the user for a new approval", a.ID, a.OperationID))
	case !now.Before(a.ExpiresAt):
		return deny(ledger.ReasonApprovalExpired,
			fmt.Sprintf("approval %d for operation %q expired at %s; ask the user for a new approval", a.ID, a.OperationID, a.ExpiresAt.UTC().Format(time.RFC3339)))
	case a.Tool != tool:
		return deny(ledger.ReasonApprovalToolMismatch,
			fmt.Sprintf("approval %d covers tool %q, not %q", a.ID, a.Tool, tool))
	}
	if len(used.Uncounted) > 0 {
		return deny(ledger.ReasonCostCeilingExceeded,
			fmt.Sprintf("approval %d has spend committed that cannot be added up in %s (reservations %v), so its ceiling cannot be checked; ask the user for a new approval", a.ID, a.MaxTotalCost.Currency, used.Uncounted))
	}
	jobs := route.jobs()
	if used.RemoteJobs+jobs > a.MaxRemoteJobs {
		switch {
		case retry:
			return deny(ledger.ReasonRetryUsesNewOperation,
				fmt.Sprintf("these arguments already run as operation %q, which used the %d remote job(s) approved; retry with operation ID %q instead of a new one", a.OperationID, a.MaxRemoteJobs, a.OperationID))
		case jobs > 1 && used.RemoteJobs == 0:
			return deny(ledger.ReasonRemoteJobLimitReached,
				fmt.Sprintf("this call would start %d remote jobs and approval %d allows %d; ask the user to approve %d, or start fewer", jobs, a.ID, a.MaxRemoteJobs, jobs))
		case jobs > 1:
			return deny(ledger.ReasonRemoteJobLimitReached,
				fmt.Sprintf("this call would start %d remote jobs, approval %d allows %d and %d are already started or reserved", jobs, a.ID, a.MaxRemoteJobs, used.RemoteJobs))
		}
		return deny(ledger.ReasonRemoteJobLimitReached,
			fmt.Sprintf("approval %d allows %d remote job(s) and %d are already started or reserved", a.ID, a.MaxRemoteJobs, used.RemoteJobs))
	}
	total, err := used.Spend.Add(route.Estimate)
	if err != nil {
		return deny(ledger.ReasonCostCeilingExceeded,
			fmt.Sprintf("the estimate is in a different currency than approval %d: %v", a.ID, err))
	}
	if total.Micros > a.MaxTotalCost.Micros {
		if jobs > 1 {
			return deny(ledger.ReasonCostCeilingExceeded,
				fmt.Sprintf("this call would start %d remote jobs estimated at %s in all, which with %s already committed exceeds the approved ceiling of %s; ask the user to raise the approval, or start fewer", jobs, route.Estimate.Display(), used.Spend.Display(), a.MaxTotalCost.Display()))
		}
		return deny(ledger.ReasonCostCeilingExceeded,
			fmt.Sprintf("estimated %s plus %s already committed exceeds the approved ceiling of %s; ask the user to raise the approval", route.Estimate.Display(), used.Spend.Display(), a.MaxTotalCost.Display()))
	}
	return Verdict{Allowed: true}
}

// WaitingRetry refuses a call under a new operation ID whose arguments
// already wait for an approval as operation opID: it is a retry of that
// operation, which runs once an approver approves it.
func WaitingRetry(opID string) Verdict {
	return deny(ledger.ReasonRetryUsesNewOperation,
		fmt.Sprintf("these arguments already wait for an approval as operation %q; retry with operation ID %q instead of a new one, and it runs once an approver approves it", opID, opID))
}

func deny(reason, msg string) Verdict { return Verdict{Reason: reason, Message: msg} }

// Committed sums what reservations commit against their approval: a held
// reservation counts its estimate, a settled one its actual charges, a
// released one nothing. Amounts in another currency than currency are never
// added; they are listed in Uncounted instead.
func Committed(rs []*ledger.Reservation, currency string) Usage {
	u := Usage{Spend: money.Zero(currency)}
	for _, r := range rs {
		var amount money.Amount
		switch r.Status {
		case ledger.ReservationHeld:
			amount = r.Amount
		case ledger.ReservationSettled:
			amount = r.Settled
			// A reservation settled at zero may carry no currency of its own.
			if amount.IsZero() {
				amount.Currency = u.Spend.Currency
			}
		default:
			continue
		}
		u.RemoteJobs += r.RemoteJobs
		sum, err := u.Spend.Add(amount)
		if err != nil {
			u.Uncounted = append(u.Uncounted, r.ID)
			continue
		}
		u.Spend = sum
	}
	return u
}

// Breach is a final cost that the approval's ceiling is not shown to cover.
type Breach struct {
	// NotComparable says amounts could not be added up (another currency,
	// or beyond the range of an amount), so the ceiling cannot be shown to
	// hold; Total and Over are then zero.
	NotComparable bool
	// Final is the operation's final cost; Total is what the approval is
	// committed to with it; Over is Total minus Ceiling.
	Final, Total, Ceiling, Over money.Amount
	// UncountedCharges are the operation's final charges that could not be
	// added to Final; UncountedReservations the other operations'
	// reservations that could not be added to Total.
	UncountedCharges      []string
	UncountedReservations []int64
}

// CostBreach compares what approval a is committed to — the held and
// settled reservations of its other operations plus operation opRef's
// final cost — with its ceiling. It returns nil when the ceiling holds.
// uncounted lists the operation's final charges that could not be added to
// final: with any, the ceiling cannot be shown to hold, and that is a
// breach too.
func CostBreach(a *ledger.Approval, reservations []*ledger.Reservation, opRef int64, final money.Amount, uncounted []string) (*Breach, error) {
	var others []*ledger.Reservation
	for _, r := range reservations {
		if r.OperationRef != opRef {
			others = append(others, r)
		}
	}
	used := Committed(others, a.MaxTotalCost.Currency)
	total, err := used.Spend.Add(final)
	switch {
	case err != nil || len(used.Uncounted) > 0 || len(uncounted) > 0:
		return &Breach{NotComparable: true, Final: final, Ceiling: a.MaxTotalCost,
			UncountedCharges: uncounted, UncountedReservations: used.Uncounted}, nil
	case total.Micros > a.MaxTotalCost.Micros:
		over, err := total.Sub(a.MaxTotalCost)
		if err != nil {
			return nil, err
		}
		return &Breach{Final: final, Total: total, Ceiling: a.MaxTotalCost, Over: over}, nil
	}
	return nil, nil
}

// StrictestRetry is the strictest of the retry policies that apply to an
// operation (those of its approval, of the tool when it was accepted, and of
// the tool now): no_automatic_resend wins over lookup_then_attach, and a
// policy this version does not know counts as no_automatic_resend. Empty
// policies are not set and are skipped; none set at all is
// no_automatic_resend.
func StrictestRetry(policies ...ledger.RetryPolicy) ledger.RetryPolicy {
	var out ledger.RetryPolicy
	for _, p := range policies {
		switch p {
		case "":
		case ledger.RetryLookupThenAttach:
			if out == "" {
				out = p
			}
		default:
			return ledger.RetryNoAutomaticResend
		}
	}
	if out == "" {
		return ledger.RetryNoAutomaticResend
	}
	return out
}
