package ledger

import "time"

// ReasonOperationArchived: the operation ID names an operation that ended
// and was moved into an archive; within the ID's retention a retry starts
// nothing and is refused with this reason.
const ReasonOperationArchived = "operation_archived"

// Tombstone is what the live ledger keeps of an archived operation: who it
// belonged to, when it ended, the chain head the archive holds and the
// archive file it is in. Until KeyUntil its operation ID stays taken.
type Tombstone struct {
	OperationRef int64
	Tenant       string
	OperationID  string
	TaskID       string
	EndedAt      time.Time
	ChainHead    string
	ArchiveFile  string
	// KeyUntil is the operation's end plus the retention of its
	// operation ID: until then a retry of the ID is refused.
	KeyUntil   time.Time
	ArchivedAt time.Time
}

// ArchiveListParams select ended operations to archive: those that ended
// before EndedBefore, by row ID after AfterRef, at most Limit (default
// 500).
type ArchiveListParams struct {
	EndedBefore time.Time
	AfterRef    int64
	Limit       int
}

// DefaultArchiveBatch is how many operations one prune transaction
// deletes when the caller names no batch size: small enough that no
// acceptance waits long behind it.
const DefaultArchiveBatch = 500
