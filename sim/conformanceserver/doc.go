// Command conformanceserver is a test-only MCP server: the upstream that
// taskgate stands in front of when the official conformance suite's Tasks
// extension scenarios (tasks-lifecycle, tasks-mrtr-input, …) are run
// through the gateway (conformance/tasks.yaml is the matching configuration).
//
// It offers every tool those scenarios call, as plain tools: greet answers at
// once; slow_compute, failing_job and protocol_error_job run a remote job
// (a sleep, a tool error, a JSON-RPC error); confirm_delete, multi_input and
// test_tool_with_task ask the user through multi-round-trip input requests
// (SEP-2322) before they run one. It never answers with a task itself: the
// tasks the scenarios see are taskgate's. For taskgate to look a job up
// before it sends again, every job-running tool takes an idempotency_key
// argument (a repeated key returns the key's job instead of running another),
// and lookup_job, get_job and cancel_job are its provider contract.
//
// It serves Streamable HTTP at /mcp, statelessly: the scenarios' upstream
// traffic is protocol 2026-07-28, where input requests travel in results
// and no session is needed. Jobs live in memory and end with the process.
//
// It stands in for a third party: it must never import taskgate's packages,
// and nothing outside tests and the conformance harness may start it.
//
// Usage:
//
//	conformanceserver -http 127.0.0.1:8960
//
// It prints the URL it serves on its first line of standard output, so that
// -http 127.0.0.1:0 can be used.
package main
