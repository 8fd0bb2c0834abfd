// Package receipt holds the receipt model — the reconciled account of one
// operation — its review rules and next actions, and its three renderings
// (YAML, JSON, Markdown), with a JSON Schema for the JSON form ([Schema]).
// What the operation's jobs and charges add up to and whether its
// reconciliation is complete come from [reconcile.Assess], the assessment
// the worker records by, applied to what the ledger recorded.
//
// [Build] is a pure function of ledger data: the same [Input] always yields
// the same [Receipt]. [Load] only reads a [ledger.Store]. This package must
// never call a provider, never mutate the ledger and never read a clock
// inside Build; whatever a receipt says is derived from what the ledger
// recorded.
//
// # Signatures
//
// Signing is a step of its own after Build: [Sign] takes the private key
// and the signing time from its caller and adds a [Signature] block, a
// detached JWS (alg EdDSA for an Ed25519 key, ES256 for an ECDSA P-256
// key; kid the key's RFC 7638 thumbprint) over
// the RFC 8785 canonical JSON of the rendering without that block, which
// holds the chain head the receipt was built from (chain_head). YAML and
// Markdown carry the block as text; the JSON rendering is what [Verify]
// checks, against public keys it is given, naming the field, the key or
// the signature that failed. This package must never look up, store or
// unseal a key: it is handed one (package signingkeys keeps them). An
// unsigned receipt's renderings carry no signature block.
//
// # Money
//
// Receipts reckon in USD (the field names say so). Amounts are integer
// micro-units printed as decimals with at least two fractional digits: plain
// YAML numbers ("final_cost_usd: 17.84"), JSON strings ("17.84"), never
// floats. A charge in another currency is listed with its currency, left out
// of the USD totals, keeps reconciliation incomplete and gets a
// review_charge_currency next action.
//
// # What the receipt reads from events
//
// The reconciler records each pass as an event of kind
// [ledger.EventReconciled] whose data is
//
//	{"lookup": "answered" | "indeterminate", "detail": "…", "authoritative": true}
//
// The latest such event decides whether the provider could be asked: if its
// lookup is "indeterminate" (or its data cannot be read), reconciliation is
// indeterminate and the receipt asks to reconcile again. "authoritative"
// says that the provider's answer proves that a send without a known remote
// job started none; so do a failed event with {"nothing_started": true} and
// a lookup event with {"answer": "not_sent"} after the latest send_started
// ([reconcile.SendMayHaveStarted] reads them).
//
// Events about one remote job name it with "remote_job_id" (the provider's
// ID) in their data; cancellation_requested, effect_reversed and
// effect_not_reversed events without it apply to the whole operation. The
// ledger keeps no completion time on a remote job, so a job's completion is
// the first [ledger.EventRemoteJobObserved] event with data
// {"remote_job_id": "…", "status": "completed"}, or failing that the job's
// UpdatedAt.
//
// Each kind's data is read as its payload type in package ledger
// ([ledger.DecodeEventData]). A record whose data cannot be read that way
// proves nothing beyond its kind and is skipped, here, in
// [reconcile.SendMayHaveStarted] and in the worker (which also logs the
// records it skips).
//
// # Status rules
//
// reconciliation_status is the [reconcile.Status] of the ledger's jobs and
// charges, reckoned in USD: indeterminate when the last lookup was
// indeterminate, a remote job's status is unknown, or the operation was sent
// and no remote job is known while nothing shows that the send started none
// (the upstream refused it, it never left, or an authoritative lookup found
// nothing); complete only when the operation has ended, every remote job is
// terminal, every charge is final or refunded and in USD, and, for a priced
// tool, every completed job has a final or refunded charge; otherwise
// incomplete. The totals and unpriced_attempts come from the same
// assessment.
//
// review_status is blocked while a duplicate remote job is open (neither
// cancelled nor accepted); ready only when reconciliation is complete, no
// cost boundary breach is open and the operation is not waiting for review;
// otherwise needs_review.
package receipt
