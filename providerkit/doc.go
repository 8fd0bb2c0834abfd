// Package providerkit makes a paid or consequential tool of an MCP server
// (built on the official go-sdk) safe to put behind taskgate, or behind any
// client that retries: the provider side of the provider contract.
//
// [Kit.AddTool] wraps the tool's work. A call carries an idempotency key in
// its _meta (under [KeyMeta]); the first call with a key records a job for
// it in the [Store] and runs the work once, and every later call with that
// key answers with the same job, while it runs and after it ended. The kit
// adds the contract tools the gateway calls after a lost response
// (lookup_operation, get_job, list_charges, cancel_job, and an estimate
// tool when the tool is priced by a function), records the charges the
// work reports as integer money, and declares the whole contract in the
// tool's _meta under [ContractMeta], so that taskgate reads it from the
// server instead of from its operator's configuration.
//
// A job's key is recorded in the same transaction that creates the job,
// before any work starts, so a lookup sees every job as soon as it exists;
// see [Options.NotFoundSafeAfter] for what that lets the gateway conclude
// from "not found". Jobs survive the server's restart: [Kit.Resume] runs
// again the work of every job that had not ended, so work must be safe to
// run again for the same job ID (pass the job ID on to whatever does the
// work), and charges are recorded by an ID the work chooses, once.
//
// The stores are in the sqlitestore (embedded SQLite, pure Go) and
// postgresstore (PostgreSQL, for several replicas) packages; storetest
// holds the tests both pass.
//
// This package is for server authors. The gateway never imports it: what
// taskgate knows of a provider comes over MCP, as from any other server.
package providerkit
