package provider

import (
	"time"

	"github.com/taskgate/taskgate/ledger"
)

// Action is what the gateway does after a lookup.
type Action string

const (
	// ActionResend sends the call again: the provider documents that
	// not_found is safe after the delay that has passed.
	ActionResend Action = "resend"
	// ActionWait asks again later: not_found, but the safe delay has not
	// passed yet.
	ActionWait Action = "wait"
	// ActionAttach binds the provider's existing job; nothing is sent.
	ActionAttach Action = "attach_to_existing_job"
	// ActionFetch reads the completed job's result; nothing is sent.
	ActionFetch Action = "fetch_result"
	// ActionRecordFailure records the job's failure; no automatic re-run.
	ActionRecordFailure Action = "record_failure"
	// ActionRequireReview stops: a human resolves the operation, and
	// nothing is re-sent until then.
	ActionRequireReview Action = "require_review"
)

// Decision is an action with the reason for it.
type Decision struct {
	Action Action
	// Reason is one of ledger's Reason constants for require_review.
	Reason string
	// RetryAfter is how long to wait before asking again (ActionWait).
	RetryAfter time.Duration
}

// Decide applies the lookup table (docs/provider-contract.md, "The lookup"). intendedJobs is how
// many remote jobs the operation's call fans out to; sinceSend is how long
// ago the uncertain send started; notFoundSafeAfter is the contract's
// documented delay after which not_found means the send never arrived
// (nil: never).
func Decide(l *LookupResult, intendedJobs int, retryPolicy ledger.RetryPolicy, notFoundSafeAfter *time.Duration, sinceSend time.Duration) Decision {
	switch l.Answer {
	case Accepted, Running, Completed, Failed, Cancelled:
		if l.RemoteJobID == "" {
			// A job that exists but has no name cannot be attached,
			// fetched or recorded: the answer settles nothing.
			return Decision{Action: ActionRequireReview, Reason: ledger.ReasonLookupIndeterminate}
		}
		if intendedJobs > 1 {
			// The answer is the first job's; a call that fans out ends
			// when all its jobs have, so every one is followed.
			return Decision{Action: ActionAttach}
		}
	}
	switch l.Answer {
	case Accepted, Running:
		return Decision{Action: ActionAttach}
	case Completed:
		return Decision{Action: ActionFetch}
	case Failed, Cancelled:
		return Decision{Action: ActionRecordFailure}
	case NotFound:
		switch {
		case retryPolicy != ledger.RetryLookupThenAttach:
			return Decision{Action: ActionRequireReview, Reason: ledger.ReasonNoAutomaticResend}
		case notFoundSafeAfter == nil:
			return Decision{Action: ActionRequireReview, Reason: ledger.ReasonLookupNotFoundUnsafe}
		case sinceSend < *notFoundSafeAfter:
			return Decision{Action: ActionWait, RetryAfter: *notFoundSafeAfter - sinceSend}
		default:
			return Decision{Action: ActionResend}
		}
	default:
		if l.CallFailed {
			return Decision{Action: ActionRequireReview, Reason: ledger.ReasonLookupFailed}
		}
		return Decision{Action: ActionRequireReview, Reason: ledger.ReasonLookupIndeterminate}
	}
}
