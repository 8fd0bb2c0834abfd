// Package claudecode drives Claude Code, the real client, against a real
// `taskgate serve` in front of the simulated provider, with a scripted
// stand-in for the model's Messages API on loopback. Each scenario counts
// the provider's own jobs and charges and reads the operation's receipt
// instead of trusting what the client was answered.
//
// The scenarios run only when TASKGATE_INTEROP_CLAUDE names a Claude Code
// binary: `make interop` installs the pinned one into .cache/ and sets it;
// without it every test skips. The package holds tests only: nothing
// imports it, and it never reaches the network beyond loopback.
package claudecode
