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

func (pu poolUpstreams) Upstream(name string) (Upstream, bool) {
	u, ok := pu.p.Get(name)
	if !ok {
		return nil, false
	}
	return pooled{u}, true
}

// pooled adapts *upstream.Upstream to Upstream.
type pooled struct{ u *upstream.Upstream }

func (p pooled) Endpoint() string          { return p.u.Endpoint() }
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
