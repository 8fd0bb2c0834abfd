// Package config holds taskgate's YAML configuration: the listener, the
// ledger, how downstream callers authenticate (API keys on or off, a JWT
// issuer, the stdio tenant), worker timings, the upstream MCP servers and,
// per upstream tool, whether it is consequential, its policy and its
// provider contract.
//
// Parsing is pure: Parse reads YAML from an io.Reader, expands ${VAR}
// references, applies defaults and validates. Every validation error is a
// [FieldError] (several are joined)
// that names the file, the line when known, the field's path and the reason,
// for example
//
//	taskgate.yaml:12: upstreams[0].tools.run_suite.retry_policy: lookup_then_attach needs contract.lookup: …
//
// and unknown or mistyped fields are reported the same way. This package
// must never open connections, start processes or read the environment
// beyond the ${VAR} expansion that the caller asks for.
package config

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
)

// Config is the whole file.
type Config struct {
	// Listen is the address of the HTTP listener (MCP at /mcp, health,
	// metrics, approvals and receipts). Default 127.0.0.1:8931.
	Listen string `yaml:"listen"`
	// Database names the ledger: sqlite:PATH or a postgres:// URL.
	// Default sqlite:./taskgate.db. The --db flag and TASKGATE_DB override
	// it.
	Database string `yaml:"database"`
	// PublicURL is how clients reach this gateway; PublicURL/mcp is the
	// protected resource in OAuth metadata. It must be https, or http on a
	// loopback host. Default http://LISTEN.
	PublicURL string `yaml:"public_url"`
	// MaxBodyBytes caps a request body. Default 1 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// AllowedOrigins are the browser origins (scheme://host[:port], such as
	// https://console.example.com) allowed to call /mcp besides those always
	// allowed: the request's own host, public_url's origin, and a loopback
	// origin on a loopback listener. A request with another Origin header is
	// refused with 403, against DNS rebinding; one without any (a client
	// that is not a browser) is not concerned. Default none.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// Wait is how long a consequential call from a client without tasks
	// blocks for its result before it is told to retry with the same
	// operation ID. Default 30s.
	Wait time.Duration `yaml:"wait"`
	// TaskTTL is the retention advertised on tasks. Default 24h.
	TaskTTL time.Duration `yaml:"task_ttl"`
	// ApprovalRequestTTL is how long a call waiting for an approval (an
	// approval request) waits for an approver before it expires and its
	// task fails approval_request_expired. Default 1h.
	ApprovalRequestTTL time.Duration `yaml:"approval_request_ttl"`
	// PollInterval is the poll interval advertised on tasks. Default 1s.
	PollInterval time.Duration `yaml:"poll_interval"`
	// Retention says how long an ended operation's ID stays reserved and,
	// with archive set, when the gateway archives ended operations and
	// deletes them from the ledger. A duration alone (retention: 24h) is
	// the operation IDs' retention.
	Retention Retention `yaml:"retention"`
	// ControlSocket is the Unix socket on which `taskgate serve` takes
	// `taskgate reload`; only the gateway's user may connect (mode 0600).
	// Default taskgate-HOST-PORT.sock (from listen) in the system's
	// temporary directory; none for `serve --stdio` or port 0 unless set.
	ControlSocket string `yaml:"control_socket"`
	// Worker tunes background work.
	Worker Worker `yaml:"worker"`
	// Auth configures downstream authentication.
	Auth Auth `yaml:"auth"`
	// Secrets says how the ledger keeps the values of secret arguments.
	Secrets Secrets `yaml:"secrets"`
	// Upstreams are the MCP servers behind the gateway.
	Upstreams []*Upstream `yaml:"upstreams"`
	// Limits bound what a client, a tenant or a source address may hold of
	// the gateway, so that none can exhaust it for the others.
	Limits Limits `yaml:"limits"`
	// Telemetry says where the gateway sends its traces. Unset, it sends
	// none unless the OTEL_* environment names an OTLP endpoint.
	Telemetry Telemetry `yaml:"telemetry"`

	// File is where the configuration was read from, for messages.
	File string `yaml:"-"`
	// Warnings are what Parse accepted but wants changed, such as a field
	// under its deprecated name; each names the file, line and field like
	// an error does. The caller logs them.
	Warnings []*FieldError `yaml:"-"`
}

// Worker tunes background work (dispatch, polling, reconciliation, expiry).
type Worker struct {
	// Lease is how long a worker owns an operation between heartbeats;
	// after a crash another worker takes over once it lapses. Default 30s.
	Lease time.Duration `yaml:"lease"`
	// Sweep is how often lapsed leases are looked for. Default 5s.
	Sweep time.Duration `yaml:"sweep"`
	// UpstreamPoll is how often a running remote job is polled. Default 1s.
	UpstreamPoll time.Duration `yaml:"upstream_poll"`
	// Reconcile is how often open operations are reconciled. Default 1m.
	Reconcile time.Duration `yaml:"reconcile"`
	// FetchPoll is how often the job queue looks for work it was not told
	// of, such as scheduled jobs that came due. A job enqueued on the
	// ledger, by this replica or another, wakes the queue at once (River's
	// notifications, which it also keeps on SQLite), so a long poll costs
	// no dispatch latency; a short one costs CPU while idle. Default 1s.
	FetchPoll time.Duration `yaml:"fetch_poll"`
	// Workers is how many jobs run at once per queue: sends and polls get
	// Workers each, the other jobs (reconcile, cancel, expire)
	// max(2, Workers/2). Default 16.
	Workers int `yaml:"workers"`
	// JobRetention is how long the job queue keeps the rows of its
	// completed and cancelled jobs before its cleaner deletes them: the
	// ledger, not the queue, is the record of what was done. Default 1h.
	JobRetention time.Duration `yaml:"job_retention"`
}

// Limits bound connections, sessions, event streams, tool calls and
// sign-ins. Every one has a default; none can be turned off.
type Limits struct {
	// ReadHeaderTimeout bounds reading a request's headers. Default 10s.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// ReadTimeout bounds reading a whole request, headers and body; a
	// client that sends its body slowly is cut off after it. Default 30s.
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// WriteTimeout bounds writing an answer. On /mcp, whose answers may be
	// event streams that last as long as a call or a session, it bounds
	// each write instead, so that a client that stops reading is cut off.
	// Default 30s.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// IdleTimeout closes a keep-alive connection that sent no request for
	// this long. Default 2m.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// MaxConnections bounds the connections open at once; further ones
	// wait to be accepted. Keep it well under the process's open-file
	// limit (ulimit -n), which the ledger and upstreams share. Default 1024.
	MaxConnections int `yaml:"max_connections"`
	// Sessions bounds the 2025-11-25 sessions open at once, and
	// SessionsPerTenant those of one tenant. Defaults 1000 and 100.
	Sessions          int `yaml:"sessions"`
	SessionsPerTenant int `yaml:"sessions_per_tenant"`
	// SessionIdle ends a session that sent no request for this long.
	// Default 30m.
	SessionIdle time.Duration `yaml:"session_idle"`
	// Streams bounds the standalone event streams (GET /mcp) open at
	// once, and StreamsPerTenant those of one tenant. Defaults 1000 and
	// 100.
	Streams          int `yaml:"streams"`
	StreamsPerTenant int `yaml:"streams_per_tenant"`
	// CallsPerTenant bounds one tenant's tool calls in progress at once;
	// a call past it waits a moment (250ms) for one to end before it is
	// refused. Default 64.
	CallsPerTenant int `yaml:"calls_per_tenant"`
	// CallRate is how many tool calls per second one tenant may make on
	// average, and CallBurst how many at once after a quiet spell.
	// Defaults 25 and 50: at 50 a second one tenant's admitted operations
	// took enough of two cores to double another's latency (see
	// docs/benchmarks.md, Fairness).
	CallRate  float64 `yaml:"call_rate"`
	CallBurst int     `yaml:"call_burst"`
	// RefusalDelay holds a refused tool call this long before answering
	// it, once its tenant has been refused more than CallsPerTenant times
	// in the last second: more than clients that wait retry_after would
	// be. A tenant that ignores retry_after then sends at most one call
	// per connection per RefusalDelay. Default 1s, at most 10s.
	RefusalDelay time.Duration `yaml:"refusal_delay"`
	// JobsPerTenant bounds one tenant's worker jobs (sends, polls,
	// reconciliations, cancellations) running at once on a replica; its
	// other jobs wait their turn, so that a tenant with a backlog leaves
	// the ledger and the processors to the others. Default 4.
	JobsPerTenant int `yaml:"jobs_per_tenant"`
	// AcceptsPerTenant bounds one tenant's consequential calls being
	// accepted into the ledger at once on a replica; its further calls
	// wait their turn (they are already admitted), so that a tenant with
	// many calls at once does not fill the ledger's commits ahead of
	// another's. Default 4.
	AcceptsPerTenant int `yaml:"accepts_per_tenant"`
	// SignInsPerMinute bounds the console sign-in attempts from one source
	// address, at most that many at once. Default 10.
	SignInsPerMinute int `yaml:"sign_ins_per_minute"`
}

// Auth configures downstream authentication; the tenant always comes from
// it, never from a request body.
type Auth struct {
	// APIKeys accepts taskgate API keys (taskgate keys create). Default true.
	APIKeys *bool `yaml:"api_keys"`
	// JWT accepts OAuth 2.1 bearer JWTs from one issuer. Unset: none.
	JWT *JWT `yaml:"jwt"`
	// StdioTenant is the tenant of `taskgate serve --stdio`. Default "local".
	StdioTenant string `yaml:"stdio_tenant"`
}

// JWT names the issuer whose tokens are accepted.
type JWT struct {
	// Issuer must equal the token's iss exactly. It is advertised as the
	// authorization server, so it must be https (http only on a loopback
	// host). Required.
	Issuer string `yaml:"issuer"`
	// Audience must be one of the token's aud values; usually
	// PUBLIC_URL/mcp. Required.
	Audience string `yaml:"audience"`
	// JWKSURL is where the issuer publishes its signing keys (its
	// jwks_uri): https, or http on a loopback host. Required.
	JWKSURL string `yaml:"jwks_url"`
	// TenantClaim names the claim that holds the tenant. Default sub.
	TenantClaim string `yaml:"tenant_claim"`
	// Algorithms are the accepted signature algorithms, asymmetric only:
	// RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512.
	// Default [RS256, ES256].
	Algorithms []string `yaml:"algorithms"`
	// Leeway is the clock skew allowed on exp, nbf and iat, at most 5m.
	// Default 30s.
	Leeway time.Duration `yaml:"leeway"`
}

// Upstream is one MCP server behind the gateway.
type Upstream struct {
	// Name identifies the upstream in the ledger, approvals
	// (UPSTREAM.TOOL) and receipts: lowercase letters, digits, '_' or '-'.
	// Required.
	Name string `yaml:"name"`
	// Prefix namespaces the upstream's tools and prompts as PREFIX.tool.
	// Unset means the name; an empty string lists them unprefixed, so that
	// taskgate can stand in transparently for a single server.
	Prefix *string `yaml:"prefix"`
	// URL is a Streamable HTTP endpoint; Command starts a stdio server that
	// taskgate supervises and restarts. Exactly one is set.
	URL     string   `yaml:"url"`
	Command []string `yaml:"command"`
	// Env is added to the gateway's own environment for a Command
	// upstream.
	Env map[string]string `yaml:"env"`
	// Headers are sent on every HTTP request: the gateway's own upstream
	// credential. A downstream client's token is never passed through.
	Headers map[string]string `yaml:"headers"`
	// Contracts says where the contracts of the upstream's consequential
	// tools come from: "configured" (each tool's contract in this file) or
	// "discover" (a consequential tool that writes no contract of its own
	// takes the one the upstream's tool declares in its _meta under
	// dev.taskgate/contract, read when its tools are listed; a contract
	// written here always wins). Default configured.
	Contracts ContractSource `yaml:"contracts"`
	// TenantHeaders are headers by tenant: every request the gateway
	// makes to the upstream on behalf of a tenant listed here carries
	// that tenant's headers and no others (not Headers), on sessions of
	// that tenant alone, so that the provider tells tenants apart. Values come
	// from the environment (env), never from the file. URL upstreams only.
	TenantHeaders map[string]map[string]*HeaderValue `yaml:"tenant_headers"`
	// UnlistedTenants says what a tenant without an entry in
	// TenantHeaders gets when the upstream has any: "refuse" (its calls
	// are refused, nothing is sent) or "shared" (its requests carry
	// Headers only, the gateway's own credential). Default refuse.
	UnlistedTenants UnlistedTenants `yaml:"unlisted_tenants"`
	// Required upstreams must answer for /readyz. Default true.
	Required *bool `yaml:"required"`
	// Timeout bounds one upstream call. Default 60s.
	Timeout time.Duration `yaml:"timeout"`
	// Tasks: "auto" (use the upstream's own tasks when it offers them) or
	// "off" (always call plainly, in the background). Default auto.
	Tasks string `yaml:"tasks"`
	// MaxRestartsPerMinute bounds how often a Command upstream's process is
	// started again after it exited, within any minute; once spent, the
	// upstream is unavailable until the minute allows another start.
	// Default 5. Command upstreams only.
	MaxRestartsPerMinute int `yaml:"max_restarts_per_minute"`
	// Tools configures tools by their upstream name. Tools not listed pass
	// straight through as non-consequential.
	Tools map[string]*Tool `yaml:"tools"`
}

// UnlistedTenants is what an upstream with tenant headers does for a
// tenant it has none for.
type UnlistedTenants string

const (
	// UnlistedRefuse refuses the tenant's requests to the upstream.
	UnlistedRefuse UnlistedTenants = "refuse"
	// UnlistedShared sends them with the upstream's headers only.
	UnlistedShared UnlistedTenants = "shared"
)

// ContractSource says where an upstream's provider contracts come from.
type ContractSource string

const (
	ContractsConfigured ContractSource = "configured"
	ContractsDiscover   ContractSource = "discover"
)

// Valid reports whether s is one of the contract sources.
func (s ContractSource) Valid() bool { return s == ContractsConfigured || s == ContractsDiscover }

// HeaderValue is where a tenant's header value comes from, one of: the
// environment variable Env, read when the file is loaded (and again on each
// reload), or Sealed, a value sealed with the gateway's secrets keys
// (taskgate secrets-key seal), opened by [Config.OpenTenantHeaders]. The
// value itself is never written back, printed or logged.
type HeaderValue struct {
	// Env names the environment variable that holds the value.
	Env string `yaml:"env"`
	// Sealed is the value sealed for this upstream, tenant and header.
	Sealed string `yaml:"sealed"`

	value string
}

// Value is the header's value as read from its source; "" for a sealed
// value before OpenTenantHeaders.
func (h *HeaderValue) Value() string { return h.value }

// String hides the value, so that a HeaderValue printed by mistake shows
// only where it comes from.
func (h *HeaderValue) String() string {
	if h.Sealed != "" {
		return "sealed"
	}
	return "env " + h.Env
}

// TenantHeaderLabel is what a sealed tenant header value is bound to: the
// upstream, the tenant and the header's name (in any case), so that a value
// sealed for one of them opens for no other.
func TenantHeaderLabel(upstream, tenant, header string) string {
	return "tenant header " + upstream + " " + tenant + " " + strings.ToLower(header)
}

// OpenTenantHeaders opens the sealed tenant header values with open (the
// secrets key ring's, nil when the gateway has none), given each value and
// its TenantHeaderLabel. Its errors are FieldErrors naming the header;
// they never show a value.
func (c *Config) OpenTenantHeaders(open func(sealed, label string) ([]byte, error)) error {
	var errs []error
	for i, u := range c.Upstreams {
		if u == nil {
			continue
		}
		for _, tenant := range slices.Sorted(maps.Keys(u.TenantHeaders)) {
			for _, name := range slices.Sorted(maps.Keys(u.TenantHeaders[tenant])) {
				h := u.TenantHeaders[tenant][name]
				if h == nil || h.Sealed == "" {
					continue
				}
				field := fmt.Sprintf("upstreams[%d].tenant_headers.%s.%s.sealed", i, tenant, name)
				if open == nil {
					errs = append(errs, &FieldError{File: c.File, Field: field, Reason: "is sealed, but the gateway has no secrets key to open it; set secrets.key_file (or " +
						"TASKGATE_SECRETS_KEYS) to the key file it was sealed with"})
					continue
				}
				b, err := open(h.Sealed, TenantHeaderLabel(u.Name, tenant, name))
				switch {
				case err != nil:
					errs = append(errs, &FieldError{File: c.File, Field: field, Reason: fmt.Sprintf("does not open: %v; seal it again for this upstream, tenant and header with taskgate secrets-key seal", err)})
				case len(b) == 0 || strings.ContainsAny(string(b), "\r\n\x00"):
					errs = append(errs, &FieldError{File: c.File, Field: field, Reason: "opens to an empty value or one with a line break or NUL, which no header value may hold; seal the credential alone"})
				default:
					h.value = string(b)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// ForTenant is the configuration the upstream's requests on behalf of
// tenant use: a listed tenant's headers alone, never Headers, which are
// the gateway's own credential; Headers for an unlisted tenant under
// unlisted_tenants: shared. It has no tenant headers. ok is false for a
// tenant without an entry when the upstream has tenant headers and refuses
// unlisted tenants. An upstream without tenant headers is returned as it
// is.
func (u *Upstream) ForTenant(tenant string) (cfg *Upstream, ok bool) {
	if len(u.TenantHeaders) == 0 {
		return u, true
	}
	th, listed := u.TenantHeaders[tenant]
	if !listed && u.UnlistedTenants != UnlistedShared {
		return nil, false
	}
	out := *u
	out.TenantHeaders, out.UnlistedTenants = nil, ""
	if !listed {
		out.Headers = maps.Clone(u.Headers)
		return &out, true
	}
	out.Headers = make(map[string]string, len(th))
	for k, h := range th {
		out.Headers[k] = h.Value()
	}
	return &out, true
}

// tenantHeaderValues are the tenant headers' values, by tenant and header,
// for comparing two configurations.
func (u *Upstream) tenantHeaderValues() map[string]map[string]string {
	out := make(map[string]map[string]string, len(u.TenantHeaders))
	for t, hs := range u.TenantHeaders {
		out[t] = make(map[string]string, len(hs))
		for k, h := range hs {
			if h != nil {
				out[t][k] = h.Value()
			}
		}
	}
	return out
}

// ControlSocketPath is ControlSocket, or its default in tempDir; "" (no
// socket) when it is unset and listen names port 0, which gives no name
// another process could find.
func (c *Config) ControlSocketPath(tempDir string) string {
	if c.ControlSocket != "" {
		return c.ControlSocket
	}
	if strings.HasSuffix(c.Listen, ":0") {
		return ""
	}
	name := strings.NewReplacer(":", "-", "[", "", "]", "", "/", "-").Replace(c.Listen)
	return filepath.Join(tempDir, "taskgate-"+name+".sock")
}

// ToolPrefix returns the namespace prefix of the upstream's tools.
func (u *Upstream) ToolPrefix() string {
	if u.Prefix == nil {
		return u.Name
	}
	return *u.Prefix
}

// BudgetsCover reports whether budgets may admit the tool's calls: true
// unless its policy says budgets: false.
func (t *Tool) BudgetsCover() bool { return t.Budgets == nil || *t.Budgets }

// IsRequired reports whether /readyz waits for this upstream.
func (u *Upstream) IsRequired() bool { return u.Required == nil || *u.Required }

// Tool is the policy of one upstream tool. Every field but Consequential
// and Expose applies only to a consequential tool.
type Tool struct {
	// Consequential tools cost money or change the world: they run as
	// operations with an operation ID, in the ledger. Default false.
	Consequential bool `yaml:"consequential"`
	// Expose lists a tool that a provider contract of its upstream calls
	// (lookup, fetch, charges, cancel, estimate_tool) to clients again.
	// Such a tool belongs to the gateway and is hidden by default: it runs
	// under the gateway's one upstream credential, so a client calling it
	// acts on every tenant's jobs (cancels them, reads them). Default
	// false; set only for a tool that is safe to share across tenants.
	Expose bool `yaml:"expose"`
	// Approval: "required" (runs only under an unexpired approval for the
	// tenant, operation ID and tool) or "none". Default none.
	Approval ledger.ApprovalMode `yaml:"approval"`
	// ApproveBy lists the ways a call without an approval may get one:
	// "request" (it waits as an approval request until an approver
	// decides it) and "elicitation" (the client's user is asked in the
	// protocol, when the client declares elicitation). Default both.
	ApproveBy []ledger.ApprovalWay `yaml:"approve_by"`
	// ElicitationMaxTotalCost is the most an in-protocol form answer may
	// approve, in the tool's currency. A form answer comes from the client,
	// which the agent may drive, so it proves nothing about a human: with 0
	// no form is asked and no form answer approves anything; otherwise a
	// call whose route is estimated at most this much may be approved by a
	// form, and the approval never exceeds the route's estimate, its remote
	// jobs or this amount, whatever the answer says. A URL-mode
	// elicitation, which sends the user to the console, is not limited by
	// it. Default 0 (off).
	ElicitationMaxTotalCost money.Amount `yaml:"elicitation_max_total_cost"`
	// Budgets says whether an approver's budgets may admit a call that
	// has no approval of its own (see docs/budgets.md): false wants a
	// person for every call, whatever budgets there are. Unset: true.
	Budgets *bool `yaml:"budgets"`
	// RetryPolicy: "lookup_then_attach" (ask the provider before any
	// re-send; needs contract.lookup) or "no_automatic_resend". Default:
	// lookup_then_attach when a lookup is configured, else
	// no_automatic_resend.
	RetryPolicy ledger.RetryPolicy `yaml:"retry_policy"`
	// ClientCancel is what a client's tasks/cancel does once the call was
	// sent to the provider: "honour" (the operation is cancelled and the
	// provider asked to stop the job) or "before_send" (only a call not
	// yet sent is cancelled; a later cancel is recorded, and the job runs
	// to its end and is reconciled, so that a client's own timeout cannot
	// throw away paid work). Default honour.
	ClientCancel ledger.ClientCancel `yaml:"client_cancel"`
	// DeriveOperationID, when set, lets a call without an operation ID use
	// one derived from its fingerprint; identical calls within this window
	// are then one operation. Off by default.
	DeriveOperationID time.Duration `yaml:"derive_operation_id"`
	// SecretArguments are redacted from logs, receipts and displays, and
	// their values are encrypted in the ledger (see Secrets) and erased
	// from it once the operation has ended and been reconciled.
	SecretArguments []string `yaml:"secret_arguments"`
	// RequireTask refuses clients that cannot take a task (they get
	// -32021 on 2026-07-28) instead of making them wait for the result.
	// Default false.
	RequireTask bool `yaml:"require_task"`
	// Wait overrides the gateway's Wait for this tool. Unset: the
	// gateway's.
	Wait time.Duration `yaml:"wait"`
	// InputBeforeTask is how long a call from a 2026-07-28 client that
	// takes tasks and declares elicitation waits for the upstream's answer
	// to the first send before it gets its task: a question asked by then
	// comes back in the call's result (input_required), and the call with
	// the answer gets the task, as from a tool that gathers input before
	// it runs as a task. Unset: the task at once.
	InputBeforeTask time.Duration `yaml:"input_before_task"`
	// Contract is the provider contract.
	Contract Contract `yaml:"contract"`
	// Declared says the tool takes the contract its upstream declares:
	// it is consequential, writes no contract, and its upstream has
	// contracts: discover. Set when the file is loaded.
	Declared bool `yaml:"-"`
}

// Contract is the provider contract of one tool: how the operation ID
// reaches the provider, how an operation is looked up, how a job's result,
// charges and cancellation are reached. Field names in it are paths into a
// tool's structured result; a dot descends into an object ("job.id").
type Contract struct {
	// Key says how the operation ID reaches the provider. Unset: it does
	// not.
	Key KeyPassing `yaml:"key"`
	// RemoteJobIDField is the field of the call's structured result that
	// holds the remote job ID. Formerly job_id_field, still accepted with a
	// warning.
	RemoteJobIDField string `yaml:"remote_job_id_field" deprecated:"job_id_field"`
	// RemoteJobsField is the field of the call's structured result that
	// lists every remote job a call that fans out started: job IDs, or
	// objects holding the ID at RemoteJobIDField (default job_id). Required
	// when the cost names the call's remote jobs.
	RemoteJobsField string `yaml:"remote_jobs_field"`
	// Lookup finds what the provider knows of an operation ID. Needed by
	// retry_policy lookup_then_attach.
	Lookup *Lookup `yaml:"lookup"`
	// Fetch reads a job's status and result by its ID.
	Fetch *Fetch `yaml:"fetch"`
	// Charges lists a job's charges; a tool with charges is priced.
	Charges *Charges `yaml:"charges"`
	// Cancel cancels a job.
	Cancel *Cancel `yaml:"cancel"`
	// Cost is what a call is expected to cost.
	Cost Cost `yaml:"cost"`
}

// KeyPassing says how the operation ID reaches the provider: exactly one of
// an argument name, a _meta key or an HTTP header. None set means the
// provider honours no key.
type KeyPassing struct {
	// Argument adds the operation ID to the call's arguments under this
	// name.
	Argument string `yaml:"argument"`
	// Meta sends it in the call's _meta under this key.
	Meta string `yaml:"meta"`
	// Header sends it as this HTTP header (Streamable HTTP upstreams).
	Header string `yaml:"header"`
}

// Call is a provider tool invocation. Argument values that are exactly
// "{operation_id}" or "{remote_job_id}" are replaced ("{job_id}", the
// deprecated spelling of the latter, is accepted with a warning);
// "{argument:NAME}" copies an argument of the original call; anything else
// is sent as written.
type Call struct {
	// Tool is the upstream tool's own name (without the prefix). Required.
	Tool string `yaml:"tool"`
	// Arguments are the call's arguments, with placeholders replaced.
	Arguments map[string]any `yaml:"arguments"`
}

// Lookup finds what the provider knows of an operation ID.
type Lookup struct {
	Call `yaml:",inline"`
	// StatusField (required), RemoteJobIDField and JobsField name fields
	// of the lookup's structured result: the status, the first job's ID,
	// and the list of every job for the key (each an object with
	// RemoteJobIDField, default job_id, and StatusField), used to find
	// duplicates. RemoteJobIDField was job_id_field, still accepted with a
	// warning.
	StatusField      string `yaml:"status_field"`
	RemoteJobIDField string `yaml:"remote_job_id_field" deprecated:"job_id_field"`
	JobsField        string `yaml:"jobs_field"`
	// Statuses maps each answer (not_found, accepted, running, completed,
	// failed, cancelled) to the provider's status strings. Anything else —
	// and an error — is indeterminate. Required.
	Statuses map[string][]string `yaml:"statuses"`
	// NotFoundSafeAfter: not_found means "safe to re-send" only once this
	// much time has passed since the send started. Unset: never safe.
	NotFoundSafeAfter *time.Duration `yaml:"not_found_safe_after"`
}

// Fetch reads one job's status and, once completed, its result.
type Fetch struct {
	Call `yaml:",inline"`
	// StatusField is the field of the answer that holds the job's status.
	// Required.
	StatusField string `yaml:"status_field"`
	// Statuses maps each answer (accepted, running, completed, failed,
	// cancelled) to the provider's status strings. Required.
	Statuses map[string][]string `yaml:"statuses"`
}

// Charges lists a job's charges.
type Charges struct {
	Call `yaml:",inline"`
	// ListField is the field of the answer that holds the list of charges.
	// Required.
	ListField string `yaml:"list_field"`
	// IDField is the provider's charge ID in each charge. Required.
	IDField string `yaml:"id_field"`
	// RemoteJobIDField is the remote job a charge belongs to. Unset: every
	// listed charge is the queried job's. Formerly job_id_field, still
	// accepted with a warning.
	RemoteJobIDField string `yaml:"remote_job_id_field" deprecated:"job_id_field"`
	// AmountField is the amount, a decimal string or number. Required.
	AmountField string `yaml:"amount_field"`
	// CurrencyField is the charge's currency. Unset: cost.currency.
	CurrencyField string `yaml:"currency_field"`
	// KindField is what the provider calls the charge, such as a nested
	// paid service it passes on (a browser grid a test matrix rents).
	// Receipts list each charge with its kind. Unset: none.
	KindField string `yaml:"kind_field"`
	// StatusField is the charge's status. Required.
	StatusField string `yaml:"status_field"`
	// Statuses maps pending, final and refunded to the provider's status
	// strings. Unset: the provider's statuses must be those three words.
	Statuses map[string][]string `yaml:"statuses"`
}

// Cancel cancels a job.
type Cancel struct {
	Call `yaml:",inline"`
	// EffectReversedField is a boolean field of the answer that says
	// whether the job's effect was undone; unset or absent means unknown.
	EffectReversedField string `yaml:"effect_reversed_field"`
}

// Cost is what the tool is expected to cost.
type Cost struct {
	// Estimate is a fixed price per call, a decimal such as "18.00".
	Estimate *money.Amount `yaml:"estimate"`
	// EstimatePerJob is a fixed price per remote job of a call that fans
	// out: the call's estimate is this times its remote jobs, which
	// JobsArgument counts.
	EstimatePerJob *money.Amount `yaml:"estimate_per_job"`
	// JobsArgument names the call's argument that holds how many remote
	// jobs it starts (a whole number of at least 1), such as a matrix's
	// runner count. Unset (and no EstimateTool.JobsField): one.
	JobsArgument string `yaml:"jobs_argument"`
	// EstimateTool prices a call before it runs: its structured result's
	// Field holds the decimal estimate. Without arguments, the call's own
	// arguments are sent.
	EstimateTool *EstimateTool `yaml:"estimate_tool"`
	// Currency of estimates and charges. Default USD.
	Currency string `yaml:"currency"`
}

// EstimateTool is a provider tool that prices a call.
type EstimateTool struct {
	Call `yaml:",inline"`
	// Field is the answer's field that holds the estimate. Required.
	Field string `yaml:"field"`
	// JobsField is the answer's field that holds how many remote jobs the
	// call would start, for a call that fans out. Unset: one.
	JobsField string `yaml:"jobs_field"`
}

// Tools names the upstream tools the contract calls, each once, in the
// order lookup, fetch, charges, cancel, estimate_tool.
func (c *Contract) Tools() []string {
	var calls []*Call
	if c.Lookup != nil {
		calls = append(calls, &c.Lookup.Call)
	}
	if c.Fetch != nil {
		calls = append(calls, &c.Fetch.Call)
	}
	if c.Charges != nil {
		calls = append(calls, &c.Charges.Call)
	}
	if c.Cancel != nil {
		calls = append(calls, &c.Cancel.Call)
	}
	if c.Cost.EstimateTool != nil {
		calls = append(calls, &c.Cost.EstimateTool.Call)
	}
	var out []string
	for _, call := range calls {
		if call.Tool != "" && !slices.Contains(out, call.Tool) {
			out = append(out, call.Tool)
		}
	}
	return out
}

// FansOut reports whether the cost counts a call's remote jobs, so that
// one call may start several.
func (c *Cost) FansOut() bool {
	return c.JobsArgument != "" || c.EstimateTool != nil && c.EstimateTool.JobsField != ""
}

// Telemetry is the telemetry section.
type Telemetry struct {
	// Traces, when set, exports a span for every MCP request, upstream
	// request and worker step over OTLP.
	Traces *Traces `yaml:"traces"`
	// Resource attributes describe this gateway in every span, such as
	// deployment.environment.name: prod; service.name defaults to
	// taskgate. OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME add to
	// them; these win.
	Resource map[string]string `yaml:"resource"`
}

// TraceProtocol is how spans travel to the collector.
type TraceProtocol string

// The OTLP protocols, named as OTEL_EXPORTER_OTLP_PROTOCOL names them.
const (
	TraceProtocolHTTP TraceProtocol = "http/protobuf"
	TraceProtocolGRPC TraceProtocol = "grpc"
)

// Traces is telemetry.traces: the OTLP exporter of spans.
type Traces struct {
	// Endpoint is the collector's URL, such as http://127.0.0.1:4318
	// (http/protobuf, which posts to /v1/traces unless the URL has a
	// path) or http://127.0.0.1:4317 (grpc). https uses TLS. Default
	// the OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
	// OTEL_EXPORTER_OTLP_ENDPOINT environment variable; one of them or
	// this is required.
	Endpoint string `yaml:"endpoint"`
	// Protocol is http/protobuf or grpc. Default http/protobuf, or
	// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL / OTEL_EXPORTER_OTLP_PROTOCOL.
	Protocol TraceProtocol `yaml:"protocol"`
	// Headers go on every export, such as a collector's credential
	// (write it as ${VAR}). They add to OTEL_EXPORTER_OTLP_HEADERS and
	// are never logged.
	Headers map[string]string `yaml:"headers"`
	// SamplingRatio is the share of new traces recorded, from 0 to 1; a
	// request whose caller sampled its trace is recorded either way.
	// Default 1.
	SamplingRatio *float64 `yaml:"sampling_ratio"`
}

// Retention is the retention section.
type Retention struct {
	// OperationIDs is how long an operation ID stays reserved after its
	// operation ended; a retry within it attaches to the operation (or,
	// once archived, is refused operation_archived). Default 24h.
	OperationIDs time.Duration `yaml:"operation_ids"`
	// Archive, when set, archives ended, reconciled operations on a
	// schedule, as taskgate archive does, and deletes them from the
	// ledger. Unset, operations stay in the ledger until archived by hand.
	Archive *ArchiveSchedule `yaml:"archive"`
}

// UnmarshalYAML takes a duration alone as the operation IDs' retention,
// the section's form before it had fields.
func (r *Retention) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*r = Retention{}
		return n.Decode(&r.OperationIDs)
	}
	type plain Retention
	return n.Decode((*plain)(r))
}

// ArchiveSchedule is retention.archive: which operations the gateway
// archives, where to, and how often.
type ArchiveSchedule struct {
	// After: operations that ended longer ago than this are archived.
	// Required; at least retention.operation_ids, so that a retry within
	// the IDs' retention still finds its operation in the ledger.
	After time.Duration `yaml:"after"`
	// Out is the archive directory (taskgate archive --out). Required.
	// With several replicas it must be one directory they share: the
	// replica that leads the job queue writes it.
	Out string `yaml:"out"`
	// Every is how often a run starts. Default 1h.
	Every time.Duration `yaml:"every"`
	// Batch is how many operations one delete transaction removes.
	// Default 500.
	Batch int `yaml:"batch"`
	// MaxOperations bounds one run, which holds its operations in memory
	// until they are written; the rest wait for the next run. Default
	// 10000.
	MaxOperations int `yaml:"max_operations"`
}
