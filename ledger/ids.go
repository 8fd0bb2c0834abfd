package ledger

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"time"
)

// idEncoding's alphabet is in ASCII order, so that encoded IDs sort like
// the bytes they encode.
var idEncoding = base32.NewEncoding("234567abcdefghijklmnopqrstuvwxyz").WithPadding(base32.NoPadding)

// NewTaskID returns an unguessable task handle: 160 random bits, so a task
// ID can serve as a bearer-like handle as the MCP Tasks specification allows.
// It starts with its creation time (see orderedID).
func NewTaskID() string { return "task-" + orderedID(time.Now(), 20) }

// NewProviderKey returns a provider key (Operation.ProviderKey): 160 random
// bits, in the shape of the keys derived before, so that no one can
// compute the key of another's operation. It is fixed when the operation
// is accepted and stored with it, so it survives restarts and any change
// of the gateway's keys.
func NewProviderKey() string {
	b := make([]byte, 20)
	// crypto/rand.Read never returns an error on supported platforms.
	_, _ = rand.Read(b)
	return "taskgate-" + idEncoding.EncodeToString(b)
}

// NewRequestID returns a fresh attempt request ID: 120 random bits after
// its creation time (see orderedID).
func NewRequestID() string { return "req-" + orderedID(time.Now(), 15) }

// orderedID encodes the Unix millisecond t in 48 bits followed by n random
// bytes. IDs made close together sort together, so the unique indexes on
// task and request IDs take a group commit's new rows on a page or two
// instead of one page each; the random bytes alone make an ID unguessable.
// The creation time it reveals is no secret: tasks/get reports it anyway.
func orderedID(t time.Time, n int) string {
	b := make([]byte, 8+n)
	binary.BigEndian.PutUint64(b, uint64(t.UnixMilli()))
	// crypto/rand.Read never returns an error on supported platforms.
	_, _ = rand.Read(b[8:])
	return idEncoding.EncodeToString(b[2:])
}
