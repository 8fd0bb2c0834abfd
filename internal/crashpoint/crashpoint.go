// Package crashpoint marks the places where crash tests kill the gateway.
// Production code calls Reach at those places; in a normal build it does
// nothing, so no behaviour depends on it. A binary built with the tag
// "crashpoints" stops at the point named by TASKGATE_CRASHPOINT: it prints
// "CRASHPOINT <name>" on stderr and, on Unix, stops the whole process
// (SIGSTOP), so that a test can SIGKILL the real process exactly there,
// with nothing after the point done; elsewhere only the calling goroutine
// blocks.
package crashpoint

// Points where crash tests stop the gateway.
const (
	AfterAcceptCommit   = "after_accept_commit"
	AfterSendStarted    = "after_send_started"
	AfterUpstreamAccept = "after_upstream_accept"
	WhilePolling        = "while_polling"
	WhileReconciling    = "while_reconciling"
)
