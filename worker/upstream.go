package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/provider"
	"github.com/taskgate/taskgate/taskwire"
	"github.com/taskgate/taskgate/upstream"
)

// FromPool serves the worker's upstreams from an upstream pool.
func FromPool(p *upstream.Pool) Upstreams { return poolUpstreams{p} }

type poolUpstreams struct{ p *upstream.Pool }

// ProviderCaller lets provider contracts call tools of u.
func ProviderCaller(u *upstream.Upstream) provider.Caller { return pooled{u} }

func (pu poolUpstreams) Upstream(name, tenant string) (Upstream, bool) {
	u, ok := pu.p.Get(name)
	if !ok {
		return nil, false
	}
	t, err := u.For(tenant)
	if err != nil {
		return refused{endpoint: u.Endpoint(), err: fmt.Errorf("%w: %w", ErrNotSent, err)}, true
	}
	return pooled{t}, true
}

// refused is an upstream that has no credential for the operation's
// tenant: nothing is sent, and every request fails with ErrNotSent, as
// though the upstream were down, until the configuration gives the tenant
// a credential.
type refused struct {
	endpoint string
	err      error
}

func (r refused) Endpoint() string          { return r.endpoint }
func (r refused) Credential() string        { return "none" }
func (r refused) OffersTasks() taskwire.Era { return taskwire.EraNone }
func (r refused) CallTool(context.Context, string, map[string]any) (*mcp.CallToolResult, error) {
	return nil, r.err
}
func (r refused) Send(context.Context, *mcp.CallToolParams, http.Header, bool, *time.Duration, Elicit) (*taskwire.Task, *mcp.CallToolResult, error) {
	return nil, nil, r.err
}
func (r refused) ToolTaskSupport(context.Context, string) (taskwire.TaskSupport, error) {
	return "", r.err
}
func (r refused) GetTask(context.Context, string) (*taskwire.Task, error) { return nil, r.err }
func (r refused) TaskResult(context.Context, string, Elicit) (*mcp.CallToolResult, error) {
	return nil, r.err
}
func (r refused) CancelTask(context.Context, string) error { return r.err }
func (r refused) UpdateTask(context.Context, string, map[string]json.RawMessage) error {
	return r.err
}

// pooled adapts *upstream.Upstream to Upstream.
type pooled struct{ u *upstream.Upstream }

func (p pooled) Endpoint() string          { return p.u.Endpoint() }
func (p pooled) Credential() string        { return p.u.Credential() }
func (p pooled) OffersTasks() taskwire.Era { return p.u.OffersTasks() }

func (p pooled) CallTool(ctx context.Context, name string, args map[string]any) (*mcp.CallToolResult, error) {
	res, err := p.u.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args}, nil)
	return res, notSent(err)
}

func (p pooled) Send(ctx context.Context, params *mcp.CallToolParams, header http.Header, asTask bool, ttl *time.Duration, elicit Elicit) (*taskwire.Task, *mcp.CallToolResult, error) {
	opts := &upstream.CallOptions{Header: header, Elicit: elicit}
	if asTask {
		t, res, err := p.u.CallToolAsTask(ctx, params, ttl, opts)
		return t, res, notSent(err)
	}
	res, err := p.u.CallTool(ctx, params, opts)
	// An upstream that answers a plain call with a task runs the work as
	// that task anyway: it is the remote job to follow.
	if ute, ok := errors.AsType[*upstream.UnrequestedTaskError](err); ok && ute.Task != nil {
		return ute.Task, nil, nil
	}
	return nil, res, notSent(err)
}

// ToolTaskSupport is the tool's execution.taskSupport as the upstream
// listed it; a tool it does not list forbids tasks.
func (p pooled) ToolTaskSupport(ctx context.Context, tool string) (taskwire.TaskSupport, error) {
	tools, err := p.u.Tools(ctx)
	if err != nil {
		return "", notSent(err)
	}
	for _, t := range tools {
		if t.Name == tool {
			return taskwire.ToolTaskSupport(t), nil
		}
	}
	return taskwire.TaskForbidden, nil
}

func (p pooled) GetTask(ctx context.Context, id string) (*taskwire.Task, error) {
	return p.u.GetTask(ctx, id)
}

func (p pooled) TaskResult(ctx context.Context, id string, elicit Elicit) (*mcp.CallToolResult, error) {
	return p.u.TaskResult(ctx, id, elicit)
}

func (p pooled) CancelTask(ctx context.Context, id string) error { return p.u.CancelTask(ctx, id) }

func (p pooled) UpdateTask(ctx context.Context, id string, responses map[string]json.RawMessage) error {
	return p.u.UpdateTask(ctx, id, responses)
}

// notSent marks errors that prove the call never left the gateway.
func notSent(err error) error {
	if err != nil && errors.Is(err, upstream.ErrNotConnected) {
		return fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	return err
}
