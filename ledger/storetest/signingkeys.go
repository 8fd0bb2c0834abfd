package storetest

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskgate/taskgate/ledger"
)

// testSigningKeys checks the signing key records: created active, listed
// oldest first with retired ones, retired once with the private key
// erased, and a key ID never recorded twice, even by concurrent creates.
func testSigningKeys(t *testing.T, newStore Factory) {
	ctx := context.Background()
	s := newStore(t)
	if keys, err := s.SigningKeyList(ctx); err != nil || len(keys) != 0 {
		t.Fatalf("a new ledger lists signing keys %v (%v), want none", keys, err)
	}
	created := time.Date(2026, 5, 4, 10, 0, 0, 123456789, time.UTC)
	key := func(kid string) *ledger.SigningKey {
		return &ledger.SigningKey{
			KeyID: kid, Algorithm: ledger.SigningEdDSA, PublicKey: bytes.Repeat([]byte{kid[len(kid)-1]}, 32),
			SealedPrivateKey: "tgs1.0123456789ab.sealed-" + kid, CreatedAt: created,
		}
	}
	first, err := s.SigningKeyCreate(ctx, key("kid-1"))
	if err != nil {
		t.Fatal(err)
	}
	if first.ID == 0 || first.KeyID != "kid-1" || first.Algorithm != ledger.SigningEdDSA || !bytes.Equal(first.PublicKey, key("kid-1").PublicKey) ||
		first.SealedPrivateKey != "tgs1.0123456789ab.sealed-kid-1" || !first.CreatedAt.Equal(created.Truncate(time.Microsecond)) || !first.Active() {
		t.Errorf("created %+v, want the key as given, active, created at %s to the microsecond", first, created)
	}
	if _, err := s.SigningKeyCreate(ctx, key("kid-2")); err != nil {
		t.Fatal(err)
	}
	es := key("kid-es")
	es.Algorithm = ledger.SigningES256
	if k, err := s.SigningKeyCreate(ctx, es); err != nil || k.Algorithm != ledger.SigningES256 {
		t.Errorf("an ES256 key: %+v, %v; want it recorded as ES256", k, err)
	}
	if _, err := s.SigningKeyCreate(ctx, key("kid-1")); err == nil || !strings.Contains(err.Error(), "kid-1 is already in the ledger") {
		t.Errorf("creating kid-1 again: %v; want it refused as already in the ledger", err)
	}
	for name, k := range map[string]*ledger.SigningKey{
		"no key ID":         {Algorithm: ledger.SigningEdDSA, PublicKey: []byte{1}, SealedPrivateKey: "x"},
		"another algorithm": {KeyID: "kid-rs", Algorithm: "RS256", PublicKey: []byte{1}, SealedPrivateKey: "x"},
		"no private key":    {KeyID: "kid-pub", Algorithm: ledger.SigningEdDSA, PublicKey: []byte{1}},
	} {
		if _, err := s.SigningKeyCreate(ctx, k); err == nil {
			t.Errorf("a signing key with %s was recorded", name)
		}
	}

	retiredAt := created.Add(time.Hour).Truncate(time.Microsecond)
	retired, err := s.SigningKeyRetire(ctx, "kid-1", retiredAt)
	if err != nil {
		t.Fatal(err)
	}
	if retired.Active() || retired.SealedPrivateKey != "" || !retired.RetiredAt.Equal(retiredAt) || !bytes.Equal(retired.PublicKey, first.PublicKey) {
		t.Errorf("retired %+v, want its private key erased, retired at %s and its public key kept", retired, retiredAt)
	}
	again, err := s.SigningKeyRetire(ctx, "kid-1", retiredAt.Add(time.Hour))
	if err != nil || !again.RetiredAt.Equal(retiredAt) {
		t.Errorf("retiring kid-1 again: %+v, %v; want it kept retired at %s", again, err, retiredAt)
	}
	if _, err := s.SigningKeyRetire(ctx, "no-such-kid", retiredAt); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("retiring an unknown key: %v, want ErrNotFound", err)
	}

	keys, err := s.SigningKeyList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 3 || keys[0].KeyID != "kid-1" || keys[0].Active() || keys[1].KeyID != "kid-2" || !keys[1].Active() ||
		keys[1].SealedPrivateKey != "tgs1.0123456789ab.sealed-kid-2" || keys[2].Algorithm != ledger.SigningES256 {
		t.Fatalf("listed %+v, want kid-1 retired, kid-2 active with its sealed key, then the ES256 kid-es", keys)
	}

	// Of concurrent creates of one key ID, exactly one is recorded.
	const n = 8
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		oks  int
		errs []error
	)
	for range n {
		wg.Go(func() {
			_, err := s.SigningKeyCreate(ctx, key("kid-3"))
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				oks++
			} else if !strings.Contains(err.Error(), "already in the ledger") {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	if oks != 1 || len(errs) != 0 {
		t.Errorf("%d concurrent creates of kid-3: %d recorded, unexpected errors %v; want one recorded, the others refused as already in the ledger", n, oks, errs)
	}
}
