// Package tssdk runs the MCP TypeScript SDK's client (client.mjs, on the
// machine's Node) against a real `taskgate serve` in front of the simulated
// provider, for its task flow on protocol 2025-11-25, the SDK's newest:
// client.experimental.tasks.callToolStream and cancelTask. Each scenario
// counts the provider's own jobs and charges and reads the operation's
// receipt.
//
// The scenarios run only when TASKGATE_INTEROP_NODE_MODULES names a
// node_modules directory holding the pinned SDK: `make interop` installs it
// into .cache/ and sets it; without it every test skips. The package holds
// tests only, and it never reaches the network beyond loopback.
package tssdk
