package upstream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/taskwire"
)

// The requests a 2025-11-25 upstream may send its client during a call.
const (
	methodElicit        = "elicitation/create"
	methodCreateMessage = "sampling/createMessage"
	methodListRoots     = "roots/list"
	// methodElicitationComplete ends a URL-mode elicitation.
	methodElicitationComplete = "notifications/elicitation/complete"
)

type (
	elicitFunc        = func(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error)
	createMessageFunc = func(ctx context.Context, p *mcp.CreateMessageWithToolsParams) (*mcp.CreateMessageWithToolsResult, error)
	listRootsFunc     = func(ctx context.Context, p *mcp.ListRootsParams) (*mcp.ListRootsResult, error)
)

// asker is who answers the requests an upstream session sends: the call
// that holds the session, with its client's capabilities.
type asker struct {
	elicit        elicitFunc
	elicited      func(ctx context.Context, p *mcp.ElicitationCompleteParams)
	createMessage createMessageFunc
	listRoots     listRootsFunc
	// caps are declared in the session opened for the call.
	caps *mcp.ClientCapabilities
}

// askerOf is the asker of a call, or nil for a call that cannot be asked
// anything. Roots alone do not make a call one that can be asked: most
// clients declare roots, and a session of its own for every such call
// would cost every call a handshake. A call that can be asked for other
// reasons has its roots/list answered by its client too.
func askerOf(o *CallOptions) *asker {
	if o.Elicit == nil && o.CreateMessage == nil {
		return nil
	}
	a := &asker{elicit: o.Elicit, elicited: o.ElicitationComplete, createMessage: o.CreateMessage, listRoots: o.ListRoots, caps: o.Capabilities}
	if a.caps == nil {
		a.caps = &mcp.ClientCapabilities{}
		if a.elicit != nil {
			a.caps.Elicitation = &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}
		}
		if a.createMessage != nil {
			a.caps.Sampling = &mcp.SamplingCapabilities{}
		}
		if a.listRoots != nil {
			a.caps.RootsV2 = &mcp.RootCapabilities{}
		}
	}
	return a
}

// stdioCapabilities are what a stdio upstream's one session declares:
// everything the gateway can relay to a call's client. What the call
// holding the session cannot answer is declined (elicitation) or refused
// with -32601 (sampling), and roots/list gets an empty list.
func stdioCapabilities() *mcp.ClientCapabilities {
	return &mcp.ClientCapabilities{
		Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}},
		Sampling:    &mcp.SamplingCapabilities{},
		RootsV2:     &mcp.RootCapabilities{},
	}
}

// askRoute names the call, if any, that answers a session's requests.
type askRoute struct{ a atomic.Pointer[asker] }

func (r *askRoute) set(a *asker) { r.a.Store(a) }

func (r *askRoute) get() *asker {
	if r == nil {
		return nil
	}
	return r.a.Load()
}

// sessionCapabilitiesKey carries the capabilities a session opened for one
// call declares, from openCallSession to declareCapabilities.
type sessionCapabilitiesKey struct{}

// declareCapabilities is a sending middleware: the initialize of a session
// opened for one call declares that call's client's capabilities, so that
// the upstream asks only what the client can answer, as it would if there
// were no gateway.
func declareCapabilities(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		caps, _ := ctx.Value(sessionCapabilitiesKey{}).(*mcp.ClientCapabilities)
		if ir, ok := req.(*mcp.InitializeRequest); ok && method == "initialize" && caps != nil && ir.Params != nil {
			p := *ir.Params
			p.Capabilities = caps
			ir.Params = &p
		}
		return next(ctx, method, req)
	}
}

// answerQuestions is a receiving middleware: it hands elicitation,
// sampling and roots requests, and the end of a URL-mode elicitation, to
// the call that holds their session. They
// are taken before the go-sdk's own handling, which would validate an
// elicitation's schema more strictly than the protocol does (titled
// multi-select enums) and refuse what the client could answer; the client
// and the upstream validate what concerns them.
func (u *Upstream) answerQuestions(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case methodElicit, methodCreateMessage, methodListRoots, methodElicitationComplete:
		default:
			return next(ctx, method, req)
		}
		u.mu.Lock()
		a := u.routes[sessionOf(req)].get()
		u.mu.Unlock()
		switch r := req.(type) {
		case *mcp.ElicitRequest:
			return u.elicit(ctx, r, a)
		case *mcp.CreateMessageWithToolsRequest:
			if _, ok := r.Params.Meta[taskwire.RelatedTaskMetaKey]; ok || a == nil || a.createMessage == nil {
				u.logger.Info("refused a sampling request no call's client can answer")
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "the client of this call does not support sampling"}
			}
			return a.createMessage(ctx, r.Params)
		case *mcp.ElicitationCompleteNotificationRequest:
			if a != nil && a.elicited != nil && r.Params != nil {
				a.elicited(ctx, r.Params)
			}
		case *mcp.ListRootsRequest:
			if a == nil || a.listRoots == nil {
				// As before there were calls to ask: the gateway has no
				// files of its own to offer.
				return &mcp.ListRootsResult{Roots: []*mcp.Root{}}, nil
			}
			return a.listRoots(ctx, r.Params)
		}
		return next(ctx, method, req)
	}
}

func sessionOf(req mcp.Request) *mcp.ClientSession {
	cs, _ := req.GetSession().(*mcp.ClientSession)
	return cs
}

// elicit routes an elicitation to the call that holds its session, and
// declines what belongs to no call that can answer it. An elicitation of
// an upstream task goes to the TaskResult reading that task's result; with
// none, the upstream gets an error rather than an answer nobody gave, and
// may ask again on the next tasks/result.
func (u *Upstream) elicit(ctx context.Context, req *mcp.ElicitRequest, a *asker) (*mcp.ElicitResult, error) {
	if _, ok := req.Params.Meta[taskwire.RelatedTaskMetaKey]; ok {
		id := taskwire.RelatedTaskID(req.Params.Meta)
		u.mu.Lock()
		ask := u.taskAskers[id]
		u.mu.Unlock()
		if ask == nil {
			u.logger.Info("refused an elicitation for an upstream task whose result nobody is reading", "upstream_task_id", id)
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
				Message: fmt.Sprintf("nothing is reading the result of task %q on this client now; ask again on its next tasks/result", id)}
		}
		return ask(ctx, req.Params)
	}
	if a == nil || a.elicit == nil {
		u.logger.Info("declined an elicitation no call asked to answer", "message", req.Params.Message)
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	return a.elicit(ctx, req.Params)
}

// answerTask routes the elicitations of the upstream task taskID to elicit
// until the func it returns is called. That func ends the context of the
// elicitations under way, which also ends with ctx, and returns once they
// have returned, so that nothing answers for the caller after it.
func (u *Upstream) answerTask(ctx context.Context, taskID string, elicit elicitFunc) func() {
	ctx, cancel := context.WithCancel(ctx)
	var (
		mu     sync.Mutex
		over   bool
		active sync.WaitGroup
	)
	ask := func(rctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
		mu.Lock()
		if over {
			mu.Unlock()
			return nil, errors.New("the tasks/result this question came on has ended; ask again on the next one")
		}
		active.Add(1)
		mu.Unlock()
		defer active.Done()
		rctx, stop := context.WithCancel(rctx)
		defer stop()
		defer context.AfterFunc(ctx, stop)()
		return elicit(rctx, p)
	}
	u.mu.Lock()
	u.taskAskers[taskID] = ask
	u.mu.Unlock()
	return func() {
		u.mu.Lock()
		delete(u.taskAskers, taskID)
		u.mu.Unlock()
		mu.Lock()
		over = true
		mu.Unlock()
		cancel()
		active.Wait()
	}
}
