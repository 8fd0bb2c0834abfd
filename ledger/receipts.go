package ledger

import (
	"errors"
	"time"
)

// ErrReceiptVersionTaken means a receipt version could not be recorded
// because the operation's receipt has moved on: another issue recorded
// that version first, or the version named as previous is not the latest.
var ErrReceiptVersionTaken = errors.New("that version of the operation's receipt was already issued")

// ReceiptVersion is one issued receipt of an operation: the signed
// document exactly as it was issued, never rebuilt. Reading it needs no
// key. Versions of an operation are numbered from 1; each names the one
// before it by digest, so a reader holding any version can follow the
// receipt's history back.
type ReceiptVersion struct {
	ID           int64
	OperationRef int64
	Version      int
	// Digest is the lowercase hex SHA-256 of Document.
	Digest string
	// Previous is the Digest of version Version-1; empty for version 1.
	Previous string
	// Substance is the lowercase hex SHA-256 of what the receipt says,
	// apart from when it was built and the chain head it was built
	// from: a new version is issued only when it changes.
	Substance string
	// KeyID is the key that signed Document.
	KeyID string
	// Document is the signed receipt (a DSSE envelope, JSON) byte for
	// byte as issued.
	Document []byte
	IssuedAt time.Time
}
