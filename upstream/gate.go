package upstream

import (
	"context"
	"sync"
)

// gate lets tool calls share a session, or one call that may be asked to
// elicit hold it alone, so that every elicitation on it is that call's. A
// call waiting to hold the session goes before calls arriving after it.
type gate struct {
	mu      sync.Mutex
	sharers int
	held    bool
	waiting int // calls waiting to hold the session
	wake    chan struct{}
}

func newGate() *gate { return &gate{wake: make(chan struct{})} }

// share waits until no call holds the session or waits to, then shares it.
func (g *gate) share(ctx context.Context) error {
	g.mu.Lock()
	for g.held || g.waiting > 0 {
		if err := g.waitLocked(ctx); err != nil {
			return err
		}
	}
	g.sharers++
	g.mu.Unlock()
	return nil
}

func (g *gate) unshare() {
	g.mu.Lock()
	g.sharers--
	if g.sharers == 0 {
		g.wakeLocked()
	}
	g.mu.Unlock()
}

// hold waits until the session is unused, then holds it alone.
func (g *gate) hold(ctx context.Context) error {
	g.mu.Lock()
	g.waiting++
	for g.held || g.sharers > 0 {
		if err := g.waitLocked(ctx); err != nil {
			g.mu.Lock()
			g.waiting--
			g.wakeLocked()
			g.mu.Unlock()
			return err
		}
	}
	g.waiting--
	g.held = true
	g.mu.Unlock()
	return nil
}

func (g *gate) unhold() {
	g.mu.Lock()
	g.held = false
	g.wakeLocked()
	g.mu.Unlock()
}

// waitLocked releases g.mu until the gate changes or ctx ends. It returns
// with g.mu held on success and released on error.
func (g *gate) waitLocked(ctx context.Context) error {
	wake := g.wake
	g.mu.Unlock()
	select {
	case <-wake:
		g.mu.Lock()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gate) wakeLocked() {
	close(g.wake)
	g.wake = make(chan struct{})
}
