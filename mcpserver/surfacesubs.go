package mcpserver

import (
	"context"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Resource subscriptions: one at the upstream per subscribed URI, shared by
// every downstream session subscribed to it.

// subscribe subscribes a session to a URI: at the upstream for the first
// subscriber of the URI, here only for later ones.
func (g *Gateway) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	uri := req.Params.URI
	up, ok := g.resourceUpstream(uri)
	if !ok {
		return mcp.ResourceNotFoundError(uri)
	}
	// On the tenant's own session, with its credential: each tenant with
	// one is subscribed at the upstream for itself.
	u, err := g.upstreamFor(ctx, up, "resources/subscribe "+uri)
	if err != nil {
		return err
	}
	key := subscription{upstream: up, tenant: u.Tenant(), uri: uri}
	g.surface.mu.Lock()
	first := len(g.surface.subs[key]) == 0
	if g.surface.subs[key] == nil {
		g.surface.subs[key] = map[*mcp.ServerSession]bool{}
	}
	g.surface.subs[key][req.Session] = true
	watch := !g.surface.watched[req.Session]
	g.surface.watched[req.Session] = true
	g.surface.mu.Unlock()
	if watch {
		go g.dropSubscriptionsAtEnd(req.Session)
	}
	if !first {
		return nil
	}
	if err := u.Subscribe(ctx, uri); err != nil {
		g.surface.mu.Lock()
		delete(g.surface.subs[key], req.Session)
		g.surface.mu.Unlock()
		return g.surfaceError(ctx, up, "resources/subscribe "+uri, err)
	}
	return nil
}

// unsubscribe ends a session's subscription, and the upstream's with the
// last subscriber's.
func (g *Gateway) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	g.surface.mu.Lock()
	var last []subscription
	for key, sessions := range g.surface.subs {
		if key.uri == req.Params.URI && sessions[req.Session] {
			delete(sessions, req.Session)
			if len(sessions) == 0 {
				delete(g.surface.subs, key)
				last = append(last, key)
			}
		}
	}
	g.surface.mu.Unlock()
	// The go-sdk ends a 2026-07-28 subscription when its listen request has
	// ended, with that request's context.
	g.unsubscribeUpstream(context.WithoutCancel(ctx), last)
	return nil
}

func (g *Gateway) unsubscribeUpstream(ctx context.Context, keys []subscription) {
	for _, key := range keys {
		u, ok := g.pool.Get(key.upstream)
		if !ok {
			continue
		}
		if key.tenant != "" {
			// A tenant's upstream a reload has removed took its
			// subscriptions with its sessions.
			t, err := u.For(key.tenant)
			if err != nil || t.Tenant() != key.tenant {
				continue
			}
			u = t
		}
		if err := u.Unsubscribe(ctx, key.uri); err != nil {
			g.log.Warn("unsubscribing at the upstream failed", "upstream", key.upstream, "uri", key.uri, "err", err)
		}
	}
}

// dropSubscriptionsAtEnd ends a session's subscriptions when the session
// ends without unsubscribing.
func (g *Gateway) dropSubscriptionsAtEnd(ss *mcp.ServerSession) {
	ss.Wait()
	g.surface.mu.Lock()
	delete(g.surface.watched, ss)
	var last []subscription
	for key, sessions := range g.surface.subs {
		if sessions[ss] {
			delete(sessions, ss)
			if len(sessions) == 0 {
				delete(g.surface.subs, key)
				last = append(last, key)
			}
		}
	}
	g.surface.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(g.stopping), 10*time.Second)
	defer cancel()
	g.unsubscribeUpstream(ctx, last)
}

// resourceUpdated passes an upstream's notifications/resources/updated to
// the sessions subscribed to the URI through that upstream, on the session
// of tenant ("" the upstream's own) it came on.
func (g *Gateway) resourceUpdated(up, tenant string, p *mcp.ResourceUpdatedNotificationParams) {
	g.surface.mu.Lock()
	subscribed := len(g.surface.subs[subscription{upstream: up, tenant: tenant, uri: p.URI}]) > 0
	g.surface.mu.Unlock()
	if !subscribed {
		return
	}
	g.mu.Lock()
	servers := slices.Clone(g.servers)
	g.mu.Unlock()
	for _, s := range servers {
		if err := s.ResourceUpdated(g.stopping, &mcp.ResourceUpdatedNotificationParams{URI: p.URI, Meta: forwardableMeta(p.Meta)}); err != nil {
			g.log.Debug("forward resources/updated", "uri", p.URI, "err", err)
		}
	}
}
