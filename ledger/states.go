package ledger

import "slices"

// moves is every change of state an operation may make: the key is where it
// is, the value where it may go next. An operation starts accepted, or
// awaiting_approval when it waits for an approval request (Accept writes
// no other state), and an ended state has no way out, not even to
// review: what is learnt after the end (a duplicate job, a late charge) is
// recorded beside the state, which stays.
var moves = map[State][]State{
	StateAwaitingApproval: {
		StateAccepted,  // an approver approved: reserved and queued together
		StateFailed,    // an approver declined, or the request expired; nothing was started
		StateCancelled, // cancelled while it waited
	},
	StateAccepted: {
		StateSending,   // send started
		StateReview,    // the configuration lost the tool, or the worker kept failing (so from sending and running too)
		StateCancelled, // cancelled before anything was sent
	},
	StateSending: {
		StateAccepted,      // the call never left, or a lookup found it safe to send again
		StateRunning,       // a remote job was bound, from the answer or a lookup
		StateReview,        // a lookup cannot tell whether work started; the upstream asked for input no one can give
		StateInputRequired, // the upstream asked a question the client can answer
		StateCompleted,     // the result came back directly, or a lookup found the job done
		StateFailed,        // the upstream refused the call, or a lookup found the job failed
		StateCancelled,     // cancellation was requested
	},
	StateRunning: {
		StateReview,        // the bound job cannot be followed
		StateInputRequired, // the upstream's task asks a question the client can answer
		StateCompleted,     // the remote job finished
		StateFailed,        // the remote job failed
		StateCancelled,     // the upstream cancelled the job, or cancellation was requested
	},
	StateInputRequired: {
		StateAccepted,  // the answer is recorded: send again with it
		StateSending,   // the answer goes to a call still waiting for it (2025-11-25), or that call gave up
		StateRunning,   // the answer goes to the upstream's task that asked, or that task moved on
		StateReview,    // the question cannot be answered any more (its call died with the gateway)
		StateCompleted, // the upstream's task that asked ended with a result while the question waited
		StateCancelled, // the client declined the question, or cancellation was requested
		StateFailed,    // the task expired unanswered, or the upstream's task that asked failed
	},
	StateReview: {
		StateAccepted,  // a human vouched that nothing started: send again
		StateRunning,   // a human attached a provider job
		StateFailed,    // a human ended it
		StateCancelled, // cancellation was requested
	},
}

// CanBecome reports whether an operation in s may move to next. Staying in
// s is no move: s.CanBecome(s) is false, and a transition that names the
// current state keeps it. [Store.Transition] refuses every move CanBecome
// does not allow with [ErrIllegalTransition].
func (s State) CanBecome(next State) bool {
	return slices.Contains(moves[s], next)
}
