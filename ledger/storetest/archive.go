package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/taskgate/taskgate/ledger"
)

// testArchivePrune checks what archiving asks of a store: it lists ended
// operations by end time, deletes an archived operation with everything it
// owns only while its chain head is the one archived, records a tombstone,
// and a retry of the operation ID within the tombstone's retention is
// denied as operation_archived without starting anything, after it is
// created anew.
func testArchivePrune(t *testing.T, newStore Factory) {
	ctx := context.Background()
	s := newStore(t)
	op, _ := history(t, s, "acme", "archived-1")
	expired, _ := history(t, s, "acme", "archived-2")
	open := accept(t, s, params(t, call{"acme", "still-open", `{"suite":"open"}`})).Operation
	if _, err := s.ReceiptIssue(ctx, &ledger.ReceiptVersion{OperationRef: op.ID, Version: 1, Digest: "d1", Substance: "s1", KeyID: "kid-1",
		Document: []byte(`{"payloadType":"x"}`)}); err != nil {
		t.Fatal(err)
	}

	listed, err := s.OperationsToArchive(ctx, &ledger.ArchiveListParams{EndedBefore: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(listed); len(got) != 2 || got[0] != "acme/archived-1" || got[1] != "acme/archived-2" {
		t.Fatalf("operations to archive = %v, want archived-1 and archived-2 (still-open has not ended)", got)
	}
	if page, err := s.OperationsToArchive(ctx, &ledger.ArchiveListParams{EndedBefore: time.Now().Add(time.Hour), AfterRef: op.ID, Limit: 1}); err != nil || len(page) != 1 || page[0].ID != expired.ID {
		t.Fatalf("the page after archived-1 = %v (%v), want archived-2", ids(page), err)
	}
	if early, err := s.OperationsToArchive(ctx, &ledger.ArchiveListParams{EndedBefore: op.EndedAt}); err != nil || len(early) != 0 {
		t.Fatalf("operations that ended before archived-1 did = %v (%v), want none", ids(early), err)
	}

	stone := func(o *ledger.Operation, head string, until time.Time) *ledger.Tombstone {
		return &ledger.Tombstone{OperationRef: o.ID, Tenant: o.Tenant, OperationID: o.OperationID, TaskID: o.TaskID, EndedAt: o.EndedAt,
			ChainHead: head, ArchiveFile: "operations-2026-01-01-r000001.jsonl.gz", KeyUntil: until}
	}
	// An operation whose chain moved on since it was archived stays, and so
	// does every other operation of the batch.
	err = s.OperationsPrune(ctx, []*ledger.Tombstone{stone(op, op.ChainHead, time.Now().Add(time.Hour)), stone(expired, "elsewhere", time.Now())})
	if !errors.Is(err, ledger.ErrStateChanged) {
		t.Fatalf("pruning an operation whose head moved on: %v, want ErrStateChanged", err)
	}
	if _, err := s.OperationGet(ctx, &ledger.OperationGetParams{ID: op.ID}); err != nil {
		t.Fatalf("a failed prune deleted archived-1: %v", err)
	}
	if err := s.OperationsPrune(ctx, []*ledger.Tombstone{stone(open, open.ChainHead, time.Now().Add(time.Hour))}); !errors.Is(err, ledger.ErrStateChanged) {
		t.Fatalf("pruning an operation that has not ended: %v, want ErrStateChanged", err)
	}

	jobs, count := probeJobs(t, s), operationCount(t, s)
	if err := s.OperationsPrune(ctx, []*ledger.Tombstone{stone(op, op.ChainHead, time.Now().Add(time.Hour)), stone(expired, expired.ChainHead, time.Now().Add(-time.Minute))}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.OperationGet(ctx, &ledger.OperationGetParams{ID: op.ID}); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("archived-1 after the prune: %v, want ErrNotFound", err)
	}
	if evs, err := s.EventList(ctx, op.ID); err != nil || len(evs) != 0 {
		t.Fatalf("archived-1 keeps %d events (%v)", len(evs), err)
	}
	if atts, err := s.AttemptList(ctx, op.ID); err != nil || len(atts) != 0 {
		t.Fatalf("archived-1 keeps %d attempts (%v)", len(atts), err)
	}
	if jobs, err := s.RemoteJobList(ctx, op.ID); err != nil || len(jobs) != 0 {
		t.Fatalf("archived-1 keeps %d remote jobs (%v)", len(jobs), err)
	}
	if vs, err := s.ReceiptVersions(ctx, op.ID); err != nil || len(vs) != 0 {
		t.Fatalf("archived-1 keeps %d receipt versions (%v)", len(vs), err)
	}
	if got := operationCount(t, s); got != count-2 {
		t.Fatalf("%d operations after pruning two of %d", got, count)
	}
	stones, err := s.TombstoneList(ctx, "acme", "archived-1")
	if err != nil || len(stones) != 1 {
		t.Fatalf("tombstones of archived-1 = %v (%v), want one", stones, err)
	}
	if ts := stones[0]; ts.OperationRef != op.ID || ts.TaskID != op.TaskID || ts.ChainHead != op.ChainHead || !ts.EndedAt.Equal(op.EndedAt) ||
		ts.ArchiveFile != "operations-2026-01-01-r000001.jsonl.gz" || ts.ArchivedAt.IsZero() {
		t.Fatalf("tombstone %+v does not record archived-1 (%+v)", ts, op)
	}
	if other, err := s.TombstoneList(ctx, "other", "archived-1"); err != nil || len(other) != 0 {
		t.Fatalf("another tenant sees tombstones %v (%v)", other, err)
	}

	// Within its retention a retry is refused and starts nothing.
	res := accept(t, s, params(t, call{"acme", "archived-1", `{"suite":"settlement"}`}))
	if res.Decision != ledger.DecisionDenied || res.Reason != ledger.ReasonOperationArchived || res.Message == "" {
		t.Fatalf("a retry of an archived operation: %s %s %q, want denied %s with a message", res.Decision, res.Reason, res.Message, ledger.ReasonOperationArchived)
	}
	if got := probeJobs(t, s); got != jobs {
		t.Fatalf("a retry of an archived operation enqueued %d jobs", got-jobs)
	}
	// Another tenant's identical key is another operation.
	if r := accept(t, s, params(t, call{"other", "archived-1", `{"suite":"settlement"}`})); r.Decision != ledger.DecisionCreated {
		t.Fatalf("another tenant's archived-1: %s, want created", r.Decision)
	}
	// Once its retention has passed, the operation ID is free again.
	if r := accept(t, s, params(t, call{"acme", "archived-2", `{"suite":"settlement"}`})); r.Decision != ledger.DecisionCreated {
		t.Fatalf("archived-2 after its retention: %s %s, want created", r.Decision, r.Reason)
	}
	// Released tombstones are deleted; those still holding an ID stay.
	if n, err := s.TombstonesExpire(ctx, time.Now(), 10); err != nil || n != 1 {
		t.Fatalf("expiring released tombstones deleted %d (%v), want archived-2's one", n, err)
	}
	if left, err := s.TombstoneList(ctx, "acme", "archived-2"); err != nil || len(left) != 0 {
		t.Fatalf("archived-2 keeps tombstones %v (%v) after they expired", left, err)
	}
	if kept, err := s.TombstoneList(ctx, "acme", "archived-1"); err != nil || len(kept) != 1 {
		t.Fatalf("archived-1's tombstone, still holding its ID: %v (%v), want it kept", kept, err)
	}
	if r := accept(t, s, params(t, call{"acme", "archived-1", `{"suite":"settlement"}`})); r.Reason != ledger.ReasonOperationArchived {
		t.Fatalf("a retry of archived-1 after other tombstones expired: %s %s, want it still refused", r.Decision, r.Reason)
	}
}
