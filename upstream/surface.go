package upstream

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A SurfaceChangeKind says what an upstream announced about its resources
// and prompts.
type SurfaceChangeKind int

const (
	// ResourcesChanged: notifications/resources/list_changed (resources or
	// resource templates).
	ResourcesChanged SurfaceChangeKind = iota + 1
	// PromptsChanged: notifications/prompts/list_changed.
	PromptsChanged
	// ResourceUpdated: notifications/resources/updated for a subscribed URI.
	ResourceUpdated
	// SessionStarted: a new session, whose lists may differ from the last.
	SessionStarted
	// ToolsChanged: notifications/tools/list_changed.
	ToolsChanged
)

// A SurfaceChange is one announcement of an upstream. Updated is set for
// ResourceUpdated only. Tenant names the tenant whose own session a
// ResourceUpdated came on (a subscription made on its behalf); "" for the
// upstream's own session.
type SurfaceChange struct {
	Upstream string
	Tenant   string
	Kind     SurfaceChangeKind
	Updated  *mcp.ResourceUpdatedNotificationParams
}

// surface holds what the resources and prompts side of an upstream needs
// beyond its session: who listens to its announcements, and which URIs
// taskgate has subscribed to, so that a new session subscribes again.
type surface struct {
	mu         sync.Mutex
	listeners  []func(SurfaceChange)
	subscribed map[string]bool
	lastCaps   *mcp.ServerCapabilities // of the last session
	gen        uint64                  // bumped by list changes and new sessions
}

// OnSurfaceChange registers fn to be told of every list change and resource
// update the upstream announces, and of every new session. fn runs on the
// session's notification handler and must not block for long.
// A tenant's own sessions tell fn only of the resource updates of the
// subscriptions made on them; their lists are the upstream's.
func (u *Upstream) OnSurfaceChange(fn func(SurfaceChange)) {
	u.surface.mu.Lock()
	u.surface.listeners = append(u.surface.listeners, fn)
	u.surface.mu.Unlock()
	for _, t := range u.tenants {
		t.OnSurfaceChange(func(ch SurfaceChange) {
			if ch.Kind == ResourceUpdated {
				fn(ch)
			}
		})
	}
}

func (u *Upstream) announce(ch SurfaceChange) {
	ch.Upstream, ch.Tenant = u.cfg.Name, u.tenant
	u.surface.mu.Lock()
	listeners := slices.Clone(u.surface.listeners)
	u.surface.mu.Unlock()
	for _, fn := range listeners {
		fn(ch)
	}
}

func (u *Upstream) resourcesChanged(context.Context, *mcp.ResourceListChangedRequest) {
	u.bumpSurface()
	u.announce(SurfaceChange{Kind: ResourcesChanged})
}

func (u *Upstream) promptsChanged(context.Context, *mcp.PromptListChangedRequest) {
	u.bumpSurface()
	u.announce(SurfaceChange{Kind: PromptsChanged})
}

func (u *Upstream) bumpSurface() {
	u.surface.mu.Lock()
	u.surface.gen++
	u.surface.mu.Unlock()
}

// SurfaceGeneration changes whenever what the upstream lists besides tools
// may have changed: on its resources or prompts list_changed and on every
// new session. A listing made after reading it is current until it
// changes again.
func (u *Upstream) SurfaceGeneration() uint64 {
	u.surface.mu.Lock()
	defer u.surface.mu.Unlock()
	return u.surface.gen
}

func (u *Upstream) resourceUpdated(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
	if req.Params == nil {
		return
	}
	u.announce(SurfaceChange{Kind: ResourceUpdated, Updated: req.Params})
}

// Capabilities returns the capabilities the upstream's current session
// announced and true, or while it is down its last session's (nil before
// the first) and false. Do not modify them.
func (u *Upstream) Capabilities() (*mcp.ServerCapabilities, bool) {
	u.mu.Lock()
	c := u.conn
	u.mu.Unlock()
	if c != nil {
		return c.cs.InitializeResult().Capabilities, true
	}
	u.surface.mu.Lock()
	defer u.surface.mu.Unlock()
	return u.surface.lastCaps, false
}

// onSession runs a request on the current session, shared with tool calls
// (so that what the upstream asks during it is never taken for the
// question of a call holding the session), bounded by the timeout.
func onSession[R any](u *Upstream, ctx context.Context, what string, send func(context.Context, *mcp.ClientSession) (R, error)) (R, error) {
	var zero R
	ctx, cancel := u.bound(ctx)
	defer cancel()
	c, err := u.current(ctx)
	if err != nil {
		return zero, err
	}
	if err := c.gate.share(ctx); err != nil {
		return zero, fmt.Errorf("upstream %s: waiting for a call that may ask its client to finish: %w", u.cfg.Name, err)
	}
	defer c.gate.unshare()
	defer u.trackRequest()()
	res, err := send(ctx, c.cs)
	if err != nil {
		return zero, fmt.Errorf("upstream %s: %s: %w", u.cfg.Name, what, err)
	}
	return res, nil
}

// ListResources returns one page of resources/list, as the upstream pages.
func (u *Upstream) ListResources(ctx context.Context, cursor string) (*mcp.ListResourcesResult, error) {
	return onSession(u, ctx, "resources/list", func(ctx context.Context, cs *mcp.ClientSession) (*mcp.ListResourcesResult, error) {
		return cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
	})
}

// ListResourceTemplates returns one page of resources/templates/list.
func (u *Upstream) ListResourceTemplates(ctx context.Context, cursor string) (*mcp.ListResourceTemplatesResult, error) {
	return onSession(u, ctx, "resources/templates/list", func(ctx context.Context, cs *mcp.ClientSession) (*mcp.ListResourceTemplatesResult, error) {
		return cs.ListResourceTemplates(ctx, &mcp.ListResourceTemplatesParams{Cursor: cursor})
	})
}

// ListPrompts returns one page of prompts/list.
func (u *Upstream) ListPrompts(ctx context.Context, cursor string) (*mcp.ListPromptsResult, error) {
	return onSession(u, ctx, "prompts/list", func(ctx context.Context, cs *mcp.ClientSession) (*mcp.ListPromptsResult, error) {
		return cs.ListPrompts(ctx, &mcp.ListPromptsParams{Cursor: cursor})
	})
}

// ReadResource reads a resource. A 2026-07-28 input_required result is
// returned as it is (NeedsInput), and params' inputResponses and
// requestState go out as they are. params is not modified.
func (u *Upstream) ReadResource(ctx context.Context, params *mcp.ReadResourceParams) (*mcp.ReadResourceResult, error) {
	p := *params
	p.Meta = outgoingMeta(params.Meta)
	return onSession(u, ctx, "resources/read "+params.URI, func(ctx context.Context, cs *mcp.ClientSession) (*mcp.ReadResourceResult, error) {
		return cs.ReadResource(ctx, &p)
	})
}

// GetPrompt gets a prompt, with input_required results and retries passed
// as ReadResource passes them. params is not modified.
func (u *Upstream) GetPrompt(ctx context.Context, params *mcp.GetPromptParams) (*mcp.GetPromptResult, error) {
	p := *params
	p.Meta = outgoingMeta(params.Meta)
	return onSession(u, ctx, "prompts/get "+params.Name, func(ctx context.Context, cs *mcp.ClientSession) (*mcp.GetPromptResult, error) {
		return cs.GetPrompt(ctx, &p)
	})
}

// Complete asks for completion/complete. params is not modified.
func (u *Upstream) Complete(ctx context.Context, params *mcp.CompleteParams) (*mcp.CompleteResult, error) {
	p := *params
	p.Meta = outgoingMeta(params.Meta)
	return onSession(u, ctx, "completion/complete", func(ctx context.Context, cs *mcp.ClientSession) (*mcp.CompleteResult, error) {
		return cs.Complete(ctx, &p)
	})
}

// outgoingMeta drops the protocol's own _meta keys, which the go-sdk fills
// in itself, and a progress token, which names nothing on this connection.
func outgoingMeta(m mcp.Meta) mcp.Meta {
	out := maps.Clone(m)
	for k := range out {
		if strings.HasPrefix(k, "io.modelcontextprotocol/") || k == "progressToken" {
			delete(out, k)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Subscribe subscribes to updates of uri at the upstream, now and on every
// later session, until Unsubscribe. Updates arrive as ResourceUpdated
// changes. On a 2025-11-25 session the upstream's refusal is returned; a
// 2026-07-28 subscription is a subscriptions/listen stream that stays open,
// whose refusal can only be logged.
func (u *Upstream) Subscribe(ctx context.Context, uri string) error {
	u.surface.mu.Lock()
	if u.surface.subscribed == nil {
		u.surface.subscribed = map[string]bool{}
	}
	u.surface.subscribed[uri] = true
	u.surface.mu.Unlock()
	ctx, cancel := u.bound(ctx)
	defer cancel()
	c, err := u.current(ctx)
	if err == nil {
		err = u.subscribeOn(ctx, c, uri)
	}
	if err != nil {
		u.surface.mu.Lock()
		delete(u.surface.subscribed, uri)
		u.surface.mu.Unlock()
		return err
	}
	return nil
}

// Unsubscribe ends a subscription made with Subscribe.
func (u *Upstream) Unsubscribe(ctx context.Context, uri string) error {
	u.surface.mu.Lock()
	delete(u.surface.subscribed, uri)
	u.surface.mu.Unlock()
	ctx, cancel := u.bound(ctx)
	defer cancel()
	u.mu.Lock()
	c := u.conn
	u.mu.Unlock()
	if c == nil {
		// The next session does not subscribe again.
		return nil
	}
	if err := c.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
		return fmt.Errorf("upstream %s: resources/unsubscribe %s: %w", u.cfg.Name, uri, err)
	}
	return nil
}

func (u *Upstream) subscribeOn(ctx context.Context, c *conn, uri string) error {
	if c.protocol < protocolExtension {
		if err := c.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			return fmt.Errorf("upstream %s: resources/subscribe %s: %w", u.cfg.Name, uri, err)
		}
		return nil
	}
	// The go-sdk's Subscribe holds the listen stream open until Unsubscribe
	// or the session's end, on a context of its own.
	go func() {
		if err := c.cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: uri}); err != nil && !errors.Is(err, context.Canceled) {
			u.logger.Warn("a resource subscription at the upstream ended", "uri", uri, "error", err)
		}
	}()
	return nil
}

// sessionStarted keeps a new session's capabilities for while it is down,
// and subscribes it to every URI subscribed before.
func (u *Upstream) sessionStarted(ctx context.Context, c *conn) {
	u.surface.mu.Lock()
	u.surface.lastCaps = c.cs.InitializeResult().Capabilities
	u.surface.gen++
	uris := slices.Sorted(maps.Keys(u.surface.subscribed))
	u.surface.mu.Unlock()
	u.announce(SurfaceChange{Kind: SessionStarted})
	for _, uri := range uris {
		sctx, cancel := u.bound(ctx)
		err := u.subscribeOn(sctx, c, uri)
		cancel()
		if err != nil {
			u.logger.Warn("subscribing a new session to a resource again failed", "uri", uri, "error", err)
		}
	}
}
