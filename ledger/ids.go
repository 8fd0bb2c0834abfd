package ledger

import (
	"crypto/rand"
	"encoding/base32"
)

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewTaskID returns an unguessable task handle: 160 random bits, so a task
// ID can serve as a bearer-like handle as the MCP Tasks specification allows.
func NewTaskID() string { return "task-" + randomID(20) }

// NewRequestID returns a fresh attempt request ID.
func NewRequestID() string { return "req-" + randomID(15) }

func randomID(n int) string {
	b := make([]byte, n)
	// crypto/rand.Read never returns an error on supported platforms.
	_, _ = rand.Read(b)
	return idEncoding.EncodeToString(b)
}
