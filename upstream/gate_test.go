package upstream

import (
	"context"
	"errors"
	"testing"
	"time"
)

// acquired runs acquire in a goroutine and returns a channel that receives
// its error.
func acquired(ctx context.Context, acquire func(context.Context) error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- acquire(ctx) }()
	return ch
}

func TestGateHoldWaitsForSharersAndGoesFirst(t *testing.T) {
	ctx := testCtx(t)
	g := newGate()
	if err := g.share(ctx); err != nil {
		t.Fatal(err)
	}
	hold := acquired(ctx, g.hold)
	waitFor(ctx, t, "the holder to queue", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.waiting == 1
	})
	// A sharer arriving after a waiting holder queues behind it.
	share := acquired(ctx, g.share)
	select {
	case err := <-hold:
		t.Fatalf("hold returned %v while the session was shared", err)
	case err := <-share:
		t.Fatalf("share returned %v while a holder was waiting", err)
	case <-time.After(20 * time.Millisecond):
	}
	g.unshare()
	if err := <-hold; err != nil {
		t.Fatalf("hold after the last sharer left = %v", err)
	}
	select {
	case err := <-share:
		t.Fatalf("share returned %v while the session was held", err)
	case <-time.After(20 * time.Millisecond):
	}
	g.unhold()
	if err := <-share; err != nil {
		t.Fatalf("share after the holder left = %v", err)
	}
	g.unshare()
}

func TestGateGivesUpWhenTheContextEnds(t *testing.T) {
	ctx := testCtx(t)
	g := newGate()
	if err := g.share(ctx); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := g.hold(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hold of a shared session with a short deadline = %v, want DeadlineExceeded", err)
	}
	// The holder that gave up no longer blocks sharers.
	if err := g.share(ctx); err != nil {
		t.Fatalf("share after a holder gave up = %v", err)
	}
	g.unshare()
	g.unshare()
	if err := g.hold(ctx); err != nil {
		t.Fatalf("hold of an unused session = %v", err)
	}
}
