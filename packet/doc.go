// Package packet holds the review packet: the one document a reviewer gets
// for a run (the operations one agent run caused). It holds a summary of
// the operations' remote jobs, money, open next actions and breaches, each
// operation's receipt, the approvals the operations ran under and who gave
// them, and a verdict. It has two renderings of one model:
// GitHub-flavoured Markdown for a pull-request comment ([Packet.Markdown])
// and JSON that validates against [Schema] ([Packet.JSON]).
//
// [Build] is pure over its [Input]: the same input always yields the same
// packet. This package must never read the ledger, a clock or a file,
// never call a provider and never sign anything itself: the caller reads
// each operation's receipt as issued, or provisional while none is
// (receipt/issue.Read), and the packet names each issued one by the
// digest of its stored envelope. Whatever a packet says is what its
// receipts say; it adds only sums and the verdict.
//
// # Signed packets
//
// [Statement] makes the packet an in-toto statement ([PredicateType])
// whose subjects are its issued receipts, named by [SubjectName] with
// their digests; receipt/issue signs it with the key that issues receipts.
// [CheckReceipts] compares the receipts a signed packet lists with the
// ones at hand. The link runs from packet to receipts only: a receipt is
// issued before any packet that includes it, so it cannot name one.
//
// # Verdict
//
// The verdict is ready when every operation's receipt has review_status
// ready, and not_ready otherwise, listing each operation that is not with
// its statuses and open next actions. A packet of no operations is ready:
// it holds nothing to refuse (the command line refuses to make one unless
// asked, since an empty run is more often a mistyped run ID).
//
// # Money
//
// Like receipts, a packet reckons in USD. Its totals are the sums of the
// receipts' figures; an operation's estimate in another currency is left
// out of estimated_cost_usd, as receipts leave such charges out of theirs.
package packet
