package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/upstream"
)

// tenantKey carries the tenant of a request a server handles to the
// handlers that reach an upstream on its behalf.
type tenantKey struct{}

// withTenant puts each request's tenant in its context: the one its
// credential names, else defaultTenant (a stdio front's).
func withTenant(defaultTenant string) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			t := authn.TenantOfRequest(req)
			if t == "" {
				t = defaultTenant
			}
			return next(context.WithValue(ctx, tenantKey{}, t), method, req)
		}
	}
}

// tenantOf is the tenant withTenant gave ctx, "" if none.
func tenantOf(ctx context.Context) string {
	t, _ := ctx.Value(tenantKey{}).(string)
	return t
}

// upstreamFor is the named upstream as the tenant of ctx reaches it
// (upstream.Upstream.For): a request on a tenant's behalf never goes with
// another tenant's credential. The error is what the client hears.
func (g *Gateway) upstreamFor(ctx context.Context, name, what string) (*upstream.Upstream, error) {
	u, ok := g.pool.Get(name)
	if !ok {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("upstream %s is not configured", name)}
	}
	t, err := u.For(tenantOf(ctx))
	if err != nil {
		return nil, tenantCredentialError(name, what, err)
	}
	return t, nil
}

// tenantCredentialError is the refusal of a request on behalf of a tenant
// that the upstream has no credential for: -32602, as for other refusals,
// with data.reason tenant_credential_missing.
func tenantCredentialError(up, what string, err error) error {
	if !errors.Is(err, upstream.ErrNoTenantCredential) {
		return err
	}
	e := &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: tenantCredentialText(up, what)}
	e.Data, _ = json.Marshal(map[string]string{"reason": ledger.ReasonTenantCredentialMissing})
	return e
}

// tenantCredentialText says, to a model and a person alike, why a request
// was refused and who can change that. It names no tenant but the
// caller's own, which it does not need to name.
func tenantCredentialText(up, what string) string {
	return fmt.Sprintf("%s was refused and nothing was sent: upstream %s takes a credential per tenant and has none for yours; "+
		"ask the gateway's operator to add your tenant under the upstream's tenant_headers (retrying will not help until then)", what, up)
}
