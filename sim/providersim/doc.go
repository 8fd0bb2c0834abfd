// Package providersim holds a simulated paid provider, "hosted_test": a hosted
// test-suite runner served as a real MCP server, for taskgate's demo and tests.
//
// Its run_suite tool starts a priced remote job (hosted-suite-9912,
// hosted-suite-9913, …) that goes queued -> running -> succeeded | failed |
// cancelled. A running job carries a pending charge of the estimate (18.00
// USD); a successful one a final charge (17.84 USD); a failed or cancelled one
// a refunded charge of 0.00. An idempotency key, given as the idempotency_key
// argument, as _meta["com.example.hosted-test/idempotency-key"] or as the HTTP
// header Idempotency-Key, makes a repeated run_suite return the key's existing
// job. lookup_operation, get_job, list_charges, cancel_job and estimate_suite
// are the provider contract a gateway uses to look up, reconcile and cancel.
//
// Its run_matrix tool fans out: one call starts a matrix (hosted-matrix-1, …)
// of 1 to 64 runners at once, each an ordinary job of its own with its own
// charge, and answers when every runner has ended. The runners are recorded
// together with the call's idempotency key, so a repeated run_matrix returns
// all the key's jobs and the provider contract works on runners unchanged;
// estimate_matrix prices a number of runners. run_matrix is never served as a
// task.
//
// # Charge kinds and the browser grid
//
// Every charge says what it bills ([ChargeKind], "kind" in list_charges): a
// run_suite job's charge is of kind suite, a runner's own charge of kind
// runner. run_matrix with browser_grid also pays a nested service: every
// runner rents browser time from a browser grid, billed on the same job as a
// second charge (grid-charge-N beside charge-N) of kind browser_grid, pending
// at 2.00 USD while the runner runs, final at 1.50 USD when it succeeds and
// refunded to 0.00 when it fails or is cancelled (by default; see
// [Options.GridEstimate] and [Options.GridFinalCharge]). A repeated
// run_matrix with a known key returns the key's jobs whatever its
// browser_grid says. estimate_matrix with browser_grid adds the
// grid's estimate per runner. The record counts every charge, of every kind.
//
// # Transports, eras and tasks
//
// [Sim.HTTPHandler] serves Streamable HTTP at /mcp and [Sim.ServeStdio] serves
// a pair of streams. Both speak protocol 2026-07-28 and 2025-11-25: a plain
// tools/call works in either, and a client that uses MCP Tasks (the
// 2026-07-28 extension or 2025-11-25 experimental tasks) gets run_suite as a
// task whose ID is the job ID and whose tasks/get reports the job's progress.
// The task protocol comes from package taskwire; the job engine underneath
// knows nothing of MCP.
//
// # Faults
//
// A [Sim] misbehaves on purpose when told to ([Faults], [ParseFault],
// [Sim.SetFaults]): it can drop the response after accepting a job, ignore
// idempotency keys, answer lookups with "index unavailable" or from a lagging
// index, overcharge (a job's own charge, never the browser grid's), skip
// invoicing (every charge), run slowly, fail jobs, crash the process
// right after accepting, or start one runner more or fewer than a matrix
// asked for.
//
// # The record
//
// Whatever it answers, the Sim keeps its own authoritative record of every
// job and charge ([Sim.Jobs], [Sim.Charges], [Sim.Totals], and GET /sim/record
// on [Sim.HTTPHandler]), so tests and the demo count what really happened
// instead of trusting answers. With [Options.StatePath] the record survives a
// crashed or restarted simulator process.
//
// The simulator stands in for a third party: it must never import or know
// about taskgate's ledger, gateway or configuration (only the protocol layers,
// go-sdk and taskwire), and no package that serves (the daemon and all it
// imports) may depend on it: only the provider-sim and demo commands, the
// fixtures and the benchmarks use it.
package providersim
