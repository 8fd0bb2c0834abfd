package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/upstream"
)

// Resources, resource templates, prompts and completion of every upstream
// pass through. Prompts are namespaced as tools are; URIs and URI templates
// keep their names and each goes to the upstream that listed it. A key two
// upstreams list belongs to the first in configuration order (claim); the
// other's item is withheld and the clash logged.
//
// Lists are answered page by page as the upstreams page them (one
// downstream page is one upstream page; surfacelists.go), filtered by the
// catalog of owners that syncSurface keeps from full listings.
// Subscriptions are in surfacesubs.go. prompts/get goes through a
// go-sdk prompt per listed prompt, resources/read through one hidden
// catch-all template, so that the go-sdk's own handling of a result
// (resultType, answering an input_required result itself for a client of
// 2025-11-25) applies, and so that changing them sends list_changed.

// catchAllTemplate matches every URI; it is never listed (the lists are
// answered by listSurface) and routes each read to its upstream.
const catchAllTemplate = "{+uri}"

// surfaceState is what the gateway keeps about the upstreams' resources
// and prompts.
type surfaceState struct {
	mu       sync.Mutex
	listings map[string]*listing // by upstream: what it listed last
	// listing holds the upstreams whose listing outlasted its sync's
	// patience and goes on; late, what such a listing returned, for the
	// next sync to publish.
	listing  map[*upstream.Upstream]bool
	late     map[*upstream.Upstream]*listing
	catalog  *catalog
	clashes  map[clash]bool    // logged already
	prompts  map[string]string // downstream prompt name -> JSON, to notice changes
	subs     map[subscription]map[*mcp.ServerSession]bool
	watched  map[*mcp.ServerSession]bool
	syncBusy chan struct{}
	// resync asks for a SyncTools (tools, prompts, resources) soon; one
	// pending request stands for any number.
	resync chan struct{}
}

// listing is what one upstream listed in full, as of its surface
// generation gen.
type listing struct {
	gen       uint64
	prompts   []*mcp.Prompt
	resources []*mcp.Resource
	templates []*mcp.ResourceTemplate
}

// catalog says which upstream owns each listed key.
type catalog struct {
	prompts   map[string]promptRoute // by downstream name
	resources map[string]string      // URI -> upstream
	templates map[string]string      // URI template -> upstream
	patterns  []templateRoute        // configuration order
	// resourcesKey is every listed resource and template as JSON, to
	// notice changes.
	resourcesKey string
}

type promptRoute struct {
	upstream string
	name     string      // the upstream's
	prompt   *mcp.Prompt // as listed downstream
}

type templateRoute struct {
	upstream string
	pattern  *regexp.Regexp
}

// A subscription is keyed by the session it is made on at the upstream: the
// upstream's own (tenant "") or a tenant's (see upstream.Upstream.For).
type subscription struct{ upstream, tenant, uri string }

func (g *Gateway) initSurface() {
	g.surface.syncBusy = make(chan struct{}, 1)
	g.surface.resync = make(chan struct{}, 1)
	g.surface.listings = map[string]*listing{}
	g.surface.listing = map[*upstream.Upstream]bool{}
	g.surface.late = map[*upstream.Upstream]*listing{}
	g.surface.catalog = &catalog{}
	g.surface.clashes = map[clash]bool{}
	g.surface.prompts = map[string]string{}
	g.surface.subs = map[subscription]map[*mcp.ServerSession]bool{}
	g.surface.watched = map[*mcp.ServerSession]bool{}
	g.pool.OnSurfaceChange(g.surfaceChanged)
	go func() {
		for {
			select {
			case <-g.stopping.Done():
				return
			case <-g.surface.resync:
				g.SyncTools(g.stopping)
			}
		}
	}()
}

// surfaceCapabilities are the capabilities of every downstream server:
// everything taskgate carries, so that the go-sdk serves it (it agrees to a
// subscriptions/listen by these). What a client is told is narrowed to
// what the upstreams offer by advertiseSurface.
func surfaceCapabilities() *mcp.ServerCapabilities {
	return &mcp.ServerCapabilities{
		Tools:       &mcp.ToolCapabilities{ListChanged: true},
		Resources:   &mcp.ResourceCapabilities{Subscribe: true, ListChanged: true},
		Prompts:     &mcp.PromptCapabilities{ListChanged: true},
		Completions: &mcp.CompletionCapabilities{},
	}
}

// surfaceOptions sets the handlers of so that the go-sdk routes completion
// and subscriptions here.
func (g *Gateway) surfaceOptions(so *mcp.ServerOptions) {
	so.Capabilities = surfaceCapabilities()
	so.CompletionHandler = g.complete
	so.SubscribeHandler = g.subscribe
	so.UnsubscribeHandler = g.unsubscribe
}

// advertiseSurface tells a client, in the initialize or server/discover
// result, the union of what the upstreams offer (advertise). It runs
// inside the task layer, which adds the tasks capability after it.
func (g *Gateway) advertiseSurface(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil {
			return res, err
		}
		var caps **mcp.ServerCapabilities
		switch r := res.(type) {
		case *mcp.InitializeResult:
			caps = &r.Capabilities
		case *mcp.DiscoverResult:
			caps = &r.Capabilities
		default:
			return res, nil
		}
		var ups []*mcp.ServerCapabilities
		for _, u := range g.pool.All() {
			c, _ := u.Capabilities()
			ups = append(ups, c)
		}
		out := surfaceCapabilities()
		if *caps != nil {
			copied := **caps
			out = &copied
		}
		advertise(out, ups)
		*caps = out
		return res, nil
	}
}

// installSurface gives a new server the current prompts and the catch-all
// template. The caller holds g.mu.
func (g *Gateway) installSurface(s *mcp.Server) {
	g.surface.mu.Lock()
	defer g.surface.mu.Unlock()
	s.AddResourceTemplate(&mcp.ResourceTemplate{Name: "taskgate", URITemplate: catchAllTemplate}, g.readResource)
	for _, r := range g.surface.catalog.prompts {
		s.AddPrompt(r.prompt, g.getPrompt(r))
	}
}

// surfaceChanged handles an upstream's announcement.
func (g *Gateway) surfaceChanged(ch upstream.SurfaceChange) {
	switch ch.Kind {
	case upstream.ResourceUpdated:
		g.resourceUpdated(ch.Upstream, ch.Tenant, ch.Updated)
	case upstream.ResourcesChanged, upstream.PromptsChanged, upstream.SessionStarted, upstream.ToolsChanged:
		// Not on the notification handler: listing waits for the session.
		g.requestSync()
	}
}

// requestSync asks for a SyncTools soon, without waiting for it.
func (g *Gateway) requestSync() {
	select {
	case g.surface.resync <- struct{}{}:
	default:
	}
}

// syncSurface lists the prompts, resources and templates of every
// connected upstream whose lists may have changed since it was last listed
// (its surface generation), decides their owners and publishes the
// changes. An upstream that cannot be listed keeps what it listed before,
// so that a reconnect does not make items flicker out; one whose listing
// is slow keeps it until the listing ends (listSurfaces).
func (g *Gateway) syncSurface(ctx context.Context) {
	select {
	case g.surface.syncBusy <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer func() { <-g.surface.syncBusy }()
	fresh := g.listSurfaces(ctx, g.pool.All())
	g.mu.Lock()
	defer g.mu.Unlock()
	g.surface.mu.Lock()
	defer g.surface.mu.Unlock()
	// What a removed upstream listed goes with it.
	all := g.pool.All()
	active := map[string]bool{}
	for _, u := range all {
		active[u.Name()] = true
	}
	for u := range g.surface.late {
		if !slices.Contains(all, u) {
			delete(g.surface.late, u)
		}
	}
	gone := false
	for name := range g.surface.listings {
		if !active[name] {
			delete(g.surface.listings, name)
			gone = true
		}
	}
	if len(fresh) == 0 && !gone {
		return
	}
	maps.Copy(g.surface.listings, fresh)
	next, clashes := g.catalogOf(g.surface.listings)
	for _, c := range clashes {
		if !g.surface.clashes[c] {
			g.surface.clashes[c] = true
			g.log.Error(fmt.Sprintf("two upstreams list the same %s; the first in configuration order keeps it and the other's is withheld", c.kind),
				string(c.kind), c.key, "kept_from", c.owner, "withheld_from", c.other)
		}
	}
	g.publishSurface(next)
}

// surfaceListing is one upstream's listAll, or why there is none.
type surfaceListing struct {
	l   *listing
	err error
}

// listSurfaces lists, at once, the prompts, resources and templates of
// every connected upstream of all whose lists may have changed since they
// were last listed, and returns them by upstream name. It waits up to
// toolListPatience, as listTools does, so that one upstream that hangs does
// not hold back the others' lists, nor the next sync of tools. A listing
// that takes longer goes on, up to toolListTimeout, and keeps its result
// for the next sync, which it asks for; meanwhile no other listing of
// that upstream starts.
func (g *Gateway) listSurfaces(ctx context.Context, all []*upstream.Upstream) map[string]*listing {
	fresh := map[string]*listing{}
	pending := make([]chan surfaceListing, len(all))
	for i, u := range all {
		caps, connected := u.Capabilities()
		gen := u.SurfaceGeneration()
		g.surface.mu.Lock()
		last, late, busy := g.surface.listings[u.Name()], g.surface.late[u], g.surface.listing[u]
		delete(g.surface.late, u)
		list := false
		switch {
		case !connected || last != nil && last.gen == gen:
		case late != nil && late.gen == gen:
			fresh[u.Name()] = late
		case !busy:
			g.surface.listing[u], list = true, true
		}
		g.surface.mu.Unlock()
		if !list {
			continue
		}
		ch := make(chan surfaceListing, 1)
		pending[i] = ch
		go func() {
			lctx, cancel := context.WithTimeout(ctx, toolListTimeout)
			defer cancel()
			l, err := listAll(lctx, u, caps)
			if l != nil {
				l.gen = gen
			}
			ch <- surfaceListing{l, err}
		}()
	}
	// ended records a listing's end: a listing that failed is listed
	// again at the next sync.
	ended := func(u *upstream.Upstream, r surfaceListing, late bool) {
		g.surface.mu.Lock()
		delete(g.surface.listing, u)
		if r.err == nil && late {
			g.surface.late[u] = r.l
		}
		g.surface.mu.Unlock()
		if r.err != nil {
			g.log.Debug("upstream prompts and resources not available", "upstream", u.Name(), "err", r.err)
		}
	}
	got, arrived := awaitListings(ctx, pending, func(i int, r surfaceListing) {
		ended(all[i], r, true)
		if r.err == nil {
			g.requestSync()
		}
	})
	for i := range pending {
		if arrived[i] {
			if ended(all[i], got[i], false); got[i].err == nil {
				fresh[all[i].Name()] = got[i].l
			}
		}
	}
	return fresh
}

// listAll lists every page of what an upstream offers.
func listAll(ctx context.Context, u *upstream.Upstream, caps *mcp.ServerCapabilities) (*listing, error) {
	l := &listing{}
	if caps.Prompts != nil {
		for cursor := ""; ; {
			res, err := u.ListPrompts(ctx, cursor)
			if err != nil {
				return nil, err
			}
			l.prompts = append(l.prompts, res.Prompts...)
			if cursor = res.NextCursor; cursor == "" {
				break
			}
		}
	}
	if caps.Resources != nil {
		for cursor := ""; ; {
			res, err := u.ListResources(ctx, cursor)
			if err != nil {
				return nil, err
			}
			l.resources = append(l.resources, res.Resources...)
			if cursor = res.NextCursor; cursor == "" {
				break
			}
		}
		for cursor := ""; ; {
			res, err := u.ListResourceTemplates(ctx, cursor)
			if err != nil {
				return nil, err
			}
			l.templates = append(l.templates, res.ResourceTemplates...)
			if cursor = res.NextCursor; cursor == "" {
				break
			}
		}
	}
	return l, nil
}

// catalogOf decides the owners of everything listed, in configuration
// order.
func (g *Gateway) catalogOf(listings map[string]*listing) (*catalog, []clash) {
	var prompts, resources, templates []offer
	downstream := map[offer]*mcp.Prompt{}
	original := map[offer]string{} // the upstream's own prompt name
	var listed []any
	for _, u := range g.pool.All() {
		l := listings[u.Name()]
		if l == nil {
			continue
		}
		listed = append(listed, u.Name(), l.resources, l.templates)
		for _, p := range l.prompts {
			name := g.promptName(u.Name(), p.Name)
			o := offer{upstream: u.Name(), key: name}
			prompts = append(prompts, o)
			if downstream[o] == nil {
				dp := *p
				dp.Name = name
				dp.Meta = forwardableMeta(p.Meta)
				downstream[o], original[o] = &dp, p.Name
			}
		}
		for _, r := range l.resources {
			resources = append(resources, offer{upstream: u.Name(), key: r.URI})
		}
		for _, t := range l.templates {
			templates = append(templates, offer{upstream: u.Name(), key: t.URITemplate})
		}
	}
	key, _ := json.Marshal(listed)
	c := &catalog{prompts: map[string]promptRoute{}, resourcesKey: string(key)}
	promptOwners, clashes := claim(kindPrompt, prompts)
	for name, up := range promptOwners {
		o := offer{upstream: up, key: name}
		c.prompts[name] = promptRoute{upstream: up, name: original[o], prompt: downstream[o]}
	}
	var more []clash
	c.resources, more = claim(kindResource, resources)
	clashes = append(clashes, more...)
	c.templates, more = claim(kindTemplate, templates)
	clashes = append(clashes, more...)
	for _, o := range templates {
		if c.templates[o.key] != o.upstream {
			continue
		}
		if re, ok := templatePattern(o.key); ok {
			c.patterns = append(c.patterns, templateRoute{upstream: o.upstream, pattern: re})
		}
	}
	return c, clashes
}

// promptName is the downstream name of an upstream's prompt: namespaced by
// the upstream's prefix, as its tools are.
func (g *Gateway) promptName(up, name string) string {
	u, ok := g.pool.Get(up)
	if !ok || u.Config().ToolPrefix() == "" {
		return name
	}
	return u.Config().ToolPrefix() + "." + name
}

// publishSurface makes next the catalog and brings every server in step:
// prompts added, replaced and removed (each change notifies the server's
// sessions), and the catch-all template added again when resources or
// templates changed, which sends notifications/resources/list_changed. The
// caller holds g.mu and g.surface.mu.
func (g *Gateway) publishSurface(next *catalog) {
	var gone []string
	for name := range g.surface.prompts {
		if _, ok := next.prompts[name]; !ok {
			gone = append(gone, name)
			delete(g.surface.prompts, name)
		}
	}
	for _, s := range g.servers {
		if len(gone) > 0 {
			s.RemovePrompts(gone...)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(next.prompts)) {
		r := next.prompts[name]
		raw, err := json.Marshal(struct {
			Upstream string
			Prompt   *mcp.Prompt
		}{r.upstream, r.prompt})
		if err != nil || g.surface.prompts[name] == string(raw) {
			continue
		}
		g.surface.prompts[name] = string(raw)
		for _, s := range g.servers {
			s.AddPrompt(r.prompt, g.getPrompt(r))
		}
	}
	changed := next.resourcesKey != g.surface.catalog.resourcesKey
	g.surface.catalog = next
	if changed {
		for _, s := range g.servers {
			s.AddResourceTemplate(&mcp.ResourceTemplate{Name: "taskgate", URITemplate: catchAllTemplate}, g.readResource)
		}
	}
}

func (g *Gateway) currentCatalog() *catalog {
	g.surface.mu.Lock()
	defer g.surface.mu.Unlock()
	return g.surface.catalog
}

// resourceUpstream is the upstream a URI goes to: the one that listed it,
// else the first (in configuration order) whose listed template it
// matches, else the one upstream that may offer resources at all. Without
// any, ok is false.
func (g *Gateway) resourceUpstream(uri string) (string, bool) {
	c := g.currentCatalog()
	if up, ok := c.resources[uri]; ok {
		return up, true
	}
	for _, t := range c.patterns {
		if t.pattern.MatchString(uri) {
			return t.upstream, true
		}
	}
	return g.soleUpstream(func(caps *mcp.ServerCapabilities) bool { return caps.Resources != nil })
}

// soleUpstream is the one upstream that may offer what offers says (or is
// not connected, so may offer it), if there is exactly one.
func (g *Gateway) soleUpstream(offers func(*mcp.ServerCapabilities) bool) (string, bool) {
	var found []string
	for _, u := range g.pool.All() {
		if caps, _ := u.Capabilities(); caps == nil || offers(caps) {
			found = append(found, u.Name())
		}
	}
	if len(found) != 1 {
		return "", false
	}
	return found[0], true
}

// surfaceError is what a client hears when a request to an upstream
// failed: as for a pass-through tool call, the upstream's own JSON-RPC
// error as it is, else -32603 naming the upstream.
func (g *Gateway) surfaceError(ctx context.Context, up, what string, err error) error {
	return g.upstreamError(ctx, &route{upstream: up, tool: what}, err)
}

// getPrompt forwards prompts/get to the prompt's upstream under its own
// name, with inputResponses and requestState as they came.
func (g *Gateway) getPrompt(r promptRoute) mcp.PromptHandler {
	return func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		u, err := g.upstreamFor(ctx, r.upstream, "prompts/get "+req.Params.Name)
		if err != nil {
			return nil, err
		}
		p := *req.Params
		p.Name, p.Meta = r.name, forwardableMeta(req.Params.Meta)
		res, err := u.GetPrompt(ctx, &p)
		if err != nil {
			return nil, g.surfaceError(ctx, r.upstream, "prompts/get "+r.name, err)
		}
		out := *res
		out.Meta = forwardableMeta(res.Meta)
		return &out, nil
	}
}

// readResource forwards resources/read to the URI's upstream.
func (g *Gateway) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	up, ok := g.resourceUpstream(uri)
	if !ok {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	u, err := g.upstreamFor(ctx, up, "resources/read "+uri)
	if err != nil {
		return nil, err
	}
	p := *req.Params
	p.Meta = forwardableMeta(req.Params.Meta)
	res, err := u.ReadResource(ctx, &p)
	if err != nil {
		return nil, g.surfaceError(ctx, up, "resources/read "+uri, err)
	}
	// The go-sdk client may keep res in its cache, and the go-sdk server
	// fills in what a content leaves out: copy what it may change.
	out := *res
	out.Meta = forwardableMeta(res.Meta)
	out.Contents = make([]*mcp.ResourceContents, len(res.Contents))
	for i, c := range res.Contents {
		cc := *c
		out.Contents[i] = &cc
	}
	if res.Contents == nil {
		out.Contents = nil
	}
	return &out, nil
}

// complete forwards completion/complete to the upstream that owns the
// reference: the prompt's (under its own name) or the template's.
func (g *Gateway) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	if req.Params.Ref == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "completion/complete needs a ref"}
	}
	p := *req.Params
	p.Meta = forwardableMeta(req.Params.Meta)
	ref := *req.Params.Ref
	p.Ref = &ref
	var up string
	switch ref.Type {
	case "ref/prompt":
		r, ok := g.currentCatalog().prompts[ref.Name]
		if ok {
			up, ref.Name = r.upstream, r.name
		} else if up, ok = g.soleUpstream(func(caps *mcp.ServerCapabilities) bool { return caps.Prompts != nil }); !ok {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown prompt %q", ref.Name)}
		}
	case "ref/resource":
		var ok bool
		if up, ok = g.currentCatalog().templates[ref.URI]; !ok {
			if up, ok = g.resourceUpstream(ref.URI); !ok {
				return nil, mcp.ResourceNotFoundError(ref.URI)
			}
		}
	default:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown reference type %q", ref.Type)}
	}
	u, err := g.upstreamFor(ctx, up, "completion/complete")
	if err != nil {
		return nil, err
	}
	res, err := u.Complete(ctx, &p)
	if err != nil {
		return nil, g.surfaceError(ctx, up, "completion/complete", err)
	}
	out := *res
	out.Meta = forwardableMeta(res.Meta)
	return &out, nil
}
