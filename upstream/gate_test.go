package upstream

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// acquired runs acquire in a goroutine and returns a channel that receives
// its error.
func acquired(ctx context.Context, acquire func(context.Context) error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- acquire(ctx) }()
	return ch
}

// sharedGate returns a new gate that one call shares.
func sharedGate(t *testing.T) *gate {
	t.Helper()
	g := newGate()
	if err := g.share(t.Context()); err != nil {
		t.Fatal(err)
	}
	return g
}

// stillWaiting fails t if any of chs has received: synctest.Wait returns
// once every goroutine of the bubble is blocked, so a call that has not
// returned by then waits for the gate, not for the scheduler.
func stillWaiting(t *testing.T, what string, chs ...<-chan error) {
	t.Helper()
	synctest.Wait()
	for _, ch := range chs {
		select {
		case err := <-ch:
			t.Fatalf("%s: a call returned %v, want it to wait", what, err)
		default:
		}
	}
}

func TestGateHoldWaitsForSharersAndGoesFirst(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		g := sharedGate(t)
		hold := acquired(ctx, g.hold)
		stillWaiting(t, "hold of a shared session", hold)
		// A sharer arriving after a waiting holder queues behind it.
		share := acquired(ctx, g.share)
		stillWaiting(t, "hold and share behind a sharer and a waiting holder", hold, share)
		g.unshare()
		if err := <-hold; err != nil {
			t.Fatalf("hold after the last sharer left = %v", err)
		}
		stillWaiting(t, "share of a held session", share)
		g.unhold()
		if err := <-share; err != nil {
			t.Fatalf("share after the holder left = %v", err)
		}
		g.unshare()
	})
}

func TestGateGivesUpWhenTheContextEnds(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		g := sharedGate(t)
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
	})
}
