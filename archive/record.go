package archive

import (
	"time"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/receipt"
)

// Record is one archived operation, one line of an archive file: the
// operation with everything it owns. Event data and receipt documents are
// kept as strings so that they read back byte for byte: the chain covers
// the data's exact bytes, and a receipt's digest its document's.
type Record struct {
	Format             int                         `json:"format"`
	Operation          *ledger.Operation           `json:"operation"`
	Attempts           []*ledger.Attempt           `json:"attempts"`
	Events             []*Event                    `json:"events"`
	RemoteJobs         []*ledger.RemoteJob         `json:"remote_jobs"`
	Charges            []*ledger.Charge            `json:"charges"`
	Approval           *ledger.Approval            `json:"approval,omitempty"`
	ApprovalRequest    *ledger.ApprovalRequest     `json:"approval_request,omitempty"`
	Reservations       []*ledger.Reservation       `json:"reservations"`
	BudgetReservations []*ledger.BudgetReservation `json:"budget_reservations"`
	Receipts           []*ReceiptVersion           `json:"receipts"`
}

// Event is one event of the operation's hash chain as the ledger stored it.
type Event struct {
	ID           int64     `json:"id"`
	OperationRef int64     `json:"operation_ref"`
	AttemptRef   int64     `json:"attempt_ref"`
	Kind         string    `json:"kind"`
	Data         string    `json:"data"`
	CreatedAt    time.Time `json:"created_at"`
	Hash         string    `json:"hash"`
	PrevHash     string    `json:"prev_hash"`
}

// ReceiptVersion is one issued receipt of the operation; Document is the
// signed envelope byte for byte as issued.
type ReceiptVersion struct {
	Version   int       `json:"version"`
	Digest    string    `json:"digest"`
	Previous  string    `json:"previous,omitempty"`
	Substance string    `json:"substance"`
	KeyID     string    `json:"kid"`
	Document  string    `json:"document"`
	IssuedAt  time.Time `json:"issued_at"`
}

// NewRecord is the record of what the ledger holds of an operation: what
// receipt.Load read, and its issued receipts.
func NewRecord(in *receipt.Input, versions []*ledger.ReceiptVersion) *Record {
	r := &Record{
		Format: Format, Operation: in.Operation, Attempts: in.Attempts, RemoteJobs: in.RemoteJobs, Charges: in.Charges,
		Approval: in.Approval, ApprovalRequest: in.ApprovalRequest, Reservations: in.Reservations, BudgetReservations: in.BudgetReservations,
	}
	for _, e := range in.Events {
		r.Events = append(r.Events, &Event{ID: e.ID, OperationRef: e.OperationRef, AttemptRef: e.AttemptRef, Kind: string(e.Kind),
			Data: string(e.Data), CreatedAt: e.CreatedAt, Hash: e.Hash, PrevHash: e.PrevHash})
	}
	for _, v := range versions {
		r.Receipts = append(r.Receipts, &ReceiptVersion{Version: v.Version, Digest: v.Digest, Previous: v.Previous, Substance: v.Substance,
			KeyID: v.KeyID, Document: string(v.Document), IssuedAt: v.IssuedAt})
	}
	return r
}

// LatestReceipt is the operation's latest issued receipt; nil when none.
func (r *Record) LatestReceipt() *ReceiptVersion {
	if len(r.Receipts) == 0 {
		return nil
	}
	return r.Receipts[len(r.Receipts)-1]
}

// Chain is the operation's hash chain as the record holds it, for
// [ledger.Chain.Check].
func (r *Record) Chain() *ledger.Chain {
	c := &ledger.Chain{OperationRef: r.Operation.ID, Tenant: r.Operation.Tenant, OperationID: r.Operation.OperationID, Head: r.Operation.ChainHead}
	for _, e := range r.Events {
		c.Events = append(c.Events, &ledger.Event{ID: e.ID, OperationRef: e.OperationRef, AttemptRef: e.AttemptRef, Kind: ledger.EventKind(e.Kind),
			Data: []byte(e.Data), CreatedAt: e.CreatedAt, Hash: e.Hash, PrevHash: e.PrevHash})
	}
	return c
}

// Versions are the record's issued receipts as the ledger held them.
func (r *Record) Versions() []*ledger.ReceiptVersion {
	out := make([]*ledger.ReceiptVersion, 0, len(r.Receipts))
	for _, v := range r.Receipts {
		out = append(out, &ledger.ReceiptVersion{OperationRef: r.Operation.ID, Version: v.Version, Digest: v.Digest, Previous: v.Previous,
			Substance: v.Substance, KeyID: v.KeyID, Document: []byte(v.Document), IssuedAt: v.IssuedAt})
	}
	return out
}
