package mcpserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/upstream"
)

// listSurface answers resources/list, resources/templates/list and
// prompts/list across the upstreams, each downstream page one upstream's
// page, without what another upstream owns.
func (g *Gateway) listSurface(next mcp.MethodHandler) mcp.MethodHandler {
	resources := func(caps *mcp.ServerCapabilities) bool { return caps.Resources != nil }
	prompts := func(caps *mcp.ServerCapabilities) bool { return caps.Prompts != nil }
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "resources/list":
			var cursor string
			if p, ok := req.GetParams().(*mcp.ListResourcesParams); ok && p != nil {
				cursor = p.Cursor
			}
			return g.listPage(ctx, method, cursor, resources, func(ctx context.Context, u *upstream.Upstream, cursor string) (*page, error) {
				res, err := u.ListResources(ctx, cursor)
				if err != nil {
					return nil, err
				}
				c := g.currentCatalog()
				out := *res
				out.Resources = []*mcp.Resource{}
				for _, r := range res.Resources {
					if owner, ok := c.resources[r.URI]; !ok || owner == u.Name() {
						out.Resources = append(out.Resources, r)
					}
				}
				return &page{result: &out, next: &out.NextCursor, meta: &out.Meta, items: len(out.Resources)}, nil
			}, func() mcp.Result { return &mcp.ListResourcesResult{Resources: []*mcp.Resource{}} })
		case "resources/templates/list":
			var cursor string
			if p, ok := req.GetParams().(*mcp.ListResourceTemplatesParams); ok && p != nil {
				cursor = p.Cursor
			}
			return g.listPage(ctx, method, cursor, resources, func(ctx context.Context, u *upstream.Upstream, cursor string) (*page, error) {
				res, err := u.ListResourceTemplates(ctx, cursor)
				if err != nil {
					return nil, err
				}
				c := g.currentCatalog()
				out := *res
				out.ResourceTemplates = []*mcp.ResourceTemplate{}
				for _, t := range res.ResourceTemplates {
					if owner, ok := c.templates[t.URITemplate]; !ok || owner == u.Name() {
						out.ResourceTemplates = append(out.ResourceTemplates, t)
					}
				}
				return &page{result: &out, next: &out.NextCursor, meta: &out.Meta, items: len(out.ResourceTemplates)}, nil
			}, func() mcp.Result {
				return &mcp.ListResourceTemplatesResult{ResourceTemplates: []*mcp.ResourceTemplate{}}
			})
		case "prompts/list":
			var cursor string
			if p, ok := req.GetParams().(*mcp.ListPromptsParams); ok && p != nil {
				cursor = p.Cursor
			}
			return g.listPage(ctx, method, cursor, prompts, func(ctx context.Context, u *upstream.Upstream, cursor string) (*page, error) {
				res, err := u.ListPrompts(ctx, cursor)
				if err != nil {
					return nil, err
				}
				c := g.currentCatalog()
				out := *res
				out.Prompts = []*mcp.Prompt{}
				for _, p := range res.Prompts {
					name := g.promptName(u.Name(), p.Name)
					if r, ok := c.prompts[name]; !ok || r.upstream == u.Name() {
						dp := *p
						dp.Name, dp.Meta = name, forwardableMeta(p.Meta)
						out.Prompts = append(out.Prompts, &dp)
					}
				}
				return &page{result: &out, next: &out.NextCursor, meta: &out.Meta, items: len(out.Prompts)}, nil
			}, func() mcp.Result { return &mcp.ListPromptsResult{Prompts: []*mcp.Prompt{}} })
		}
		return next(ctx, method, req)
	}
}

// page is one upstream page of a list, already filtered.
type page struct {
	result mcp.Result
	next   *string
	meta   *mcp.Meta
	items  int
}

// listPage answers one downstream page of a list: the page of the upstream
// the cursor names (the first that may offer the list when there is none),
// with a cursor to that upstream's next page or else to the next upstream.
// An empty page is passed over when another upstream follows. With one
// upstream the cursors are the upstream's own and its errors are the
// client's; with several, an upstream that is down or fails without a
// JSON-RPC error is left out of the list. Each upstream is listed as the
// caller's tenant reaches it (upstreamFor), so a tenant that an upstream
// refuses is refused the list, whatever the upstream's place in it.
func (g *Gateway) listPage(ctx context.Context, method, cursor string, offers func(*mcp.ServerCapabilities) bool,
	fetch func(context.Context, *upstream.Upstream, string) (*page, error), empty func() mcp.Result) (mcp.Result, error) {
	ups := g.pool.All()
	start, upCursor, err := decodeCursor(cursor, ups)
	if err != nil {
		return nil, err
	}
	candidate := func(u *upstream.Upstream) bool {
		if len(ups) == 1 {
			return true
		}
		caps, connected := u.Capabilities()
		return connected && offers(caps)
	}
	var last mcp.Result
	for i := start; i < len(ups); i++ {
		u := ups[i]
		if i != start {
			upCursor = ""
		}
		if !candidate(u) {
			continue
		}
		tu, err := g.upstreamFor(ctx, u.Name(), method)
		if err != nil {
			return nil, err
		}
		pg, err := fetch(ctx, tu, upCursor)
		if err != nil {
			var werr *jsonrpc.Error
			if len(ups) == 1 || errors.As(err, &werr) {
				return nil, g.surfaceError(ctx, u.Name(), "list", err)
			}
			g.log.Warn("listing an upstream failed; its items are left out", "upstream", u.Name(), "err", err)
			continue
		}
		*pg.meta = forwardableMeta(*pg.meta)
		if *pg.next != "" {
			*pg.next = encodeCursor(u.Name(), *pg.next, ups)
			return pg.result, nil
		}
		later := slices.IndexFunc(ups[i+1:], candidate)
		if later < 0 {
			return pg.result, nil
		}
		if pg.items == 0 {
			last = pg.result
			continue
		}
		*pg.next = encodeCursor(ups[i+1+later].Name(), "", ups)
		return pg.result, nil
	}
	if last != nil {
		return last, nil
	}
	return empty(), nil
}

// encodeCursor names a page of one upstream. With a single upstream it is
// that upstream's cursor as it is.
func encodeCursor(up, cursor string, ups []*upstream.Upstream) string {
	if len(ups) == 1 {
		return cursor
	}
	b, _ := json.Marshal([2]string{up, cursor})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(cursor string, ups []*upstream.Upstream) (int, string, error) {
	if cursor == "" || len(ups) == 1 {
		return 0, cursor, nil
	}
	bad := &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid cursor: pass a nextCursor this list returned"}
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return 0, "", bad
	}
	var c [2]string
	if json.Unmarshal(b, &c) != nil {
		return 0, "", bad
	}
	i := slices.IndexFunc(ups, func(u *upstream.Upstream) bool { return u.Name() == c[0] })
	if i < 0 {
		return 0, "", bad
	}
	return i, c[1], nil
}
