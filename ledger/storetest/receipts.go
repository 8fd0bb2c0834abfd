package storetest

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/taskgate/taskgate/ledger"
)

// testReceiptVersions checks issued receipts: versions numbered from 1,
// each naming the one before by digest, the document read back byte for
// byte, and of concurrent issues of one version exactly one recorded.
func testReceiptVersions(t *testing.T, newStore Factory) {
	ctx := context.Background()
	s := newStore(t)
	op := accept(t, s, params(t, call{"acme", "receipt-versions", `{"suite":"settlement"}`})).Operation
	other := accept(t, s, params(t, call{"acme", "receipt-versions-other", `{"suite":"other"}`})).Operation
	if vs, err := s.ReceiptVersions(ctx, op.ID); err != nil || len(vs) != 0 {
		t.Fatalf("an operation never issued lists receipt versions %v (%v), want none", vs, err)
	}
	issued := time.Date(2026, 5, 4, 10, 0, 0, 123456789, time.UTC)
	// The document is kept as given, spacing and key order included.
	doc1 := []byte("{\"payloadType\":\"application/vnd.in-toto+json\",  \"payload\":\"e30=\",\"signatures\":[]}\n")
	v1, err := s.ReceiptIssue(ctx, &ledger.ReceiptVersion{
		OperationRef: op.ID, Version: 1, Digest: "d1", Substance: "s1", KeyID: "kid-1", Document: doc1, IssuedAt: issued,
	})
	if err != nil {
		t.Fatal(err)
	}
	if v1.ID == 0 || v1.OperationRef != op.ID || v1.Version != 1 || v1.Digest != "d1" || v1.Previous != "" || v1.Substance != "s1" ||
		v1.KeyID != "kid-1" || !bytes.Equal(v1.Document, doc1) || !v1.IssuedAt.Equal(issued.Truncate(time.Microsecond)) {
		t.Errorf("issued %+v, want version 1 as given, issued at %s to the microsecond", v1, issued)
	}

	refused := map[string]*ledger.ReceiptVersion{
		"version 1 again":          {OperationRef: op.ID, Version: 1, Digest: "d1b", Substance: "s1b", KeyID: "kid-1", Document: doc1},
		"version 3 before 2":       {OperationRef: op.ID, Version: 3, Digest: "d3", Previous: "d1", Substance: "s3", KeyID: "kid-1", Document: doc1},
		"version 2 naming another": {OperationRef: op.ID, Version: 2, Digest: "d2x", Previous: "dx", Substance: "s2", KeyID: "kid-1", Document: doc1},
		"version 2 of an unissued": {OperationRef: other.ID, Version: 2, Digest: "d2o", Previous: "d1", Substance: "s2", KeyID: "kid-1", Document: doc1},
	}
	for name, v := range refused {
		if _, err := s.ReceiptIssue(ctx, v); !errors.Is(err, ledger.ErrReceiptVersionTaken) {
			t.Errorf("%s: %v, want ErrReceiptVersionTaken", name, err)
		}
	}
	for name, v := range map[string]*ledger.ReceiptVersion{
		"no document":                {OperationRef: op.ID, Version: 2, Digest: "d2", Previous: "d1", Substance: "s2", KeyID: "kid-1"},
		"version 2 naming none":      {OperationRef: op.ID, Version: 2, Digest: "d2", Substance: "s2", KeyID: "kid-1", Document: doc1},
		"version 1 naming a version": {OperationRef: other.ID, Version: 1, Digest: "d1o", Previous: "d0", Substance: "s1", KeyID: "kid-1", Document: doc1},
	} {
		if _, err := s.ReceiptIssue(ctx, v); err == nil {
			t.Errorf("a receipt version with %s was recorded", name)
		}
	}

	// Of concurrent issues of version 2, exactly one is recorded.
	const n = 8
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		won    []*ledger.ReceiptVersion
		failed []error
	)
	for i := range n {
		wg.Go(func() {
			v, err := s.ReceiptIssue(ctx, &ledger.ReceiptVersion{
				OperationRef: op.ID, Version: 2, Digest: "d2-" + string(rune('a'+i)), Previous: "d1", Substance: "s2", KeyID: "kid-1",
				Document: []byte(`{"v":2}`),
			})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won = append(won, v)
			case !errors.Is(err, ledger.ErrReceiptVersionTaken):
				failed = append(failed, err)
			}
		})
	}
	wg.Wait()
	if len(won) != 1 || len(failed) != 0 {
		t.Fatalf("%d concurrent issues of version 2: %d recorded, unexpected errors %v; want one recorded, the others ErrReceiptVersionTaken", n, len(won), failed)
	}

	vs, err := s.ReceiptVersions(ctx, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 || vs[0].Version != 1 || !bytes.Equal(vs[0].Document, doc1) || vs[1].Version != 2 || vs[1].Previous != "d1" || vs[1].Digest != won[0].Digest {
		t.Errorf("listed %+v, want version 1 as issued, then version 2 naming d1", vs)
	}
	if vs, err := s.ReceiptVersions(ctx, other.ID); err != nil || len(vs) != 0 {
		t.Errorf("another operation lists receipt versions %v (%v), want none", vs, err)
	}
}
