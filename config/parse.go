package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/taskgate/taskgate/money"
)

// ErrInvalid is wrapped by every validation failure.
var ErrInvalid = errors.New("invalid configuration")

// FieldError is one invalid field: the file, the field's path, its line when
// known, and the reason.
type FieldError struct {
	File   string
	Field  string
	Line   int
	Reason string
}

func (e *FieldError) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc += ":" + strconv.Itoa(e.Line)
	}
	return fmt.Sprintf("%s: %s: %s", loc, e.Field, e.Reason)
}

// Unwrap makes errors.Is(err, ErrInvalid) hold.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// Load reads and validates the file at path, expanding ${VAR} from the
// environment.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read configuration: %w", err)
	}
	return Parse(bytes.NewReader(b), path, os.Getenv)
}

// Parse reads YAML from r, applies defaults and validates. getenv expands
// ${VAR} references in values; nil leaves them as written.
func Parse(r io.Reader, file string, getenv func(string) string) (*Config, error) {
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	}
	if getenv != nil {
		raw = expandEnv(raw, getenv)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(raw, &root); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	c := &Config{}
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	c.File = file
	c.applyDefaults()
	v := &validator{file: file, lines: lineIndex(&root)}
	c.validate(v)
	if len(v.errs) > 0 {
		return nil, errors.Join(v.errs...)
	}
	return c, nil
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

func expandEnv(b []byte, getenv func(string) string) []byte {
	return envRef.ReplaceAllFunc(b, func(m []byte) []byte {
		return []byte(getenv(string(m[2 : len(m)-1])))
	})
}

func (c *Config) applyDefaults() {
	c.Listen = or(c.Listen, "127.0.0.1:8931")
	c.Database = or(c.Database, "sqlite:./taskgate.db")
	if c.PublicURL == "" {
		c.PublicURL = "http://" + c.Listen
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	c.MaxBodyBytes = or(c.MaxBodyBytes, 1<<20)
	c.Wait = or(c.Wait, 30*time.Second)
	c.TaskTTL = or(c.TaskTTL, 24*time.Hour)
	c.PollInterval = or(c.PollInterval, time.Second)
	c.Retention = or(c.Retention, 24*time.Hour)
	w := &c.Worker
	w.Lease = or(w.Lease, 30*time.Second)
	w.Sweep = or(w.Sweep, 5*time.Second)
	w.UpstreamPoll = or(w.UpstreamPoll, time.Second)
	w.Reconcile = or(w.Reconcile, time.Minute)
	w.FetchPoll = or(w.FetchPoll, 50*time.Millisecond)
	w.Workers = or(w.Workers, 16)
	if c.Auth.APIKeys == nil {
		t := true
		c.Auth.APIKeys = &t
	}
	c.Auth.StdioTenant = or(c.Auth.StdioTenant, "local")
	if j := c.Auth.JWT; j != nil {
		j.TenantClaim = or(j.TenantClaim, "sub")
		j.Leeway = or(j.Leeway, 30*time.Second)
	}
	for _, u := range c.Upstreams {
		if u == nil {
			continue
		}
		u.Timeout = or(u.Timeout, 60*time.Second)
		u.Tasks = or(u.Tasks, "auto")
		for _, t := range u.Tools {
			if t == nil {
				continue
			}
			t.Approval = or(t.Approval, "none")
			if t.RetryPolicy == "" {
				t.RetryPolicy = RetryNoAutomaticResend
				if t.Contract.Lookup != nil {
					t.RetryPolicy = RetryLookupThenAttach
				}
			}
			t.Contract.Cost.Currency = strings.ToUpper(or(t.Contract.Cost.Currency, money.DefaultCurrency))
			if e := t.Contract.Cost.Estimate; e != nil {
				e.Currency = t.Contract.Cost.Currency
			}
		}
	}
}

func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

type validator struct {
	file  string
	lines map[string]int
	errs  []error
}

func (v *validator) fail(field, format string, args ...any) {
	v.errs = append(v.errs, &FieldError{File: v.file, Field: field, Line: v.lines[field], Reason: fmt.Sprintf(format, args...)})
}

var upstreamName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)

// LookupAnswers are the classes a provider's lookup answer maps to.
var LookupAnswers = []string{"not_found", "accepted", "running", "completed", "failed", "cancelled"}

// FetchAnswers are the classes a fetched job status maps to.
var FetchAnswers = []string{"accepted", "running", "completed", "failed", "cancelled"}

// ChargeAnswers are the classes a provider's charge status maps to.
var ChargeAnswers = []string{"pending", "final", "refunded"}

func (c *Config) validate(v *validator) {
	if _, _, err := splitHostPort(c.Listen); err != nil {
		v.fail("listen", "%v (want host:port, e.g. 127.0.0.1:8931)", err)
	}
	if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.fail("public_url", "must be an http(s) URL, got %q", c.PublicURL)
	}
	if !strings.HasPrefix(c.Database, "sqlite:") && !strings.HasPrefix(c.Database, "postgres://") && !strings.HasPrefix(c.Database, "postgresql://") {
		v.fail("database", "must start with sqlite: or postgres://")
	}
	positive := map[string]time.Duration{
		"wait": c.Wait, "task_ttl": c.TaskTTL, "poll_interval": c.PollInterval, "retention": c.Retention,
		"worker.lease": c.Worker.Lease, "worker.sweep": c.Worker.Sweep, "worker.upstream_poll": c.Worker.UpstreamPoll,
		"worker.reconcile": c.Worker.Reconcile, "worker.fetch_poll": c.Worker.FetchPoll,
	}
	for _, f := range sortedKeys(positive) {
		if positive[f] < 0 {
			v.fail(f, "cannot be negative (got %s)", positive[f])
		}
	}
	if c.Worker.FetchPoll < time.Millisecond {
		v.fail("worker.fetch_poll", "must be at least 1ms (got %s)", c.Worker.FetchPoll)
	}
	if c.Worker.Lease < 100*time.Millisecond {
		v.fail("worker.lease", "must be at least 100ms (got %s)", c.Worker.Lease)
	}
	if c.MaxBodyBytes < 1024 {
		v.fail("max_body_bytes", "must be at least 1024 (got %d)", c.MaxBodyBytes)
	}
	if c.Worker.Workers < 1 {
		v.fail("worker.workers", "must be at least 1 (got %d)", c.Worker.Workers)
	}
	if j := c.Auth.JWT; j != nil {
		if j.Issuer == "" {
			v.fail("auth.jwt.issuer", "is required")
		}
		if j.Audience == "" {
			v.fail("auth.jwt.audience", "is required")
		}
		if u, err := url.Parse(j.JWKSURL); j.JWKSURL == "" || err != nil || u.Host == "" {
			v.fail("auth.jwt.jwks_url", "must be the issuer's JWKS URL")
		}
	}
	if !*c.Auth.APIKeys && c.Auth.JWT == nil {
		v.fail("auth", "accepts no credentials: enable api_keys or configure jwt")
	}

	names := map[string]int{}
	prefixes := map[string]string{}
	for i, u := range c.Upstreams {
		f := fmt.Sprintf("upstreams[%d]", i)
		if u == nil {
			v.fail(f, "is empty")
			continue
		}
		switch {
		case u.Name == "":
			v.fail(f+".name", "is required")
		case !upstreamName.MatchString(u.Name):
			v.fail(f+".name", "%q must be lowercase letters, digits, '_' or '-', starting with a letter", u.Name)
		default:
			if j, dup := names[u.Name]; dup {
				v.fail(f+".name", "%q is also the name of upstreams[%d]", u.Name, j)
			}
			names[u.Name] = i
		}
		if p := u.ToolPrefix(); p != "" && strings.ContainsAny(p, " ./") {
			v.fail(f+".prefix", "%q may not contain spaces, dots or slashes", p)
		} else if other, dup := prefixes[p]; dup {
			v.fail(f+".prefix", "%q is also the prefix of upstream %q; tool names would collide", p, other)
		} else {
			prefixes[p] = u.Name
		}
		switch {
		case u.URL == "" && len(u.Command) == 0:
			v.fail(f, "needs a url (Streamable HTTP) or a command (stdio)")
		case u.URL != "" && len(u.Command) > 0:
			v.fail(f, "has both url and command; choose one")
		case u.URL != "":
			if pu, err := url.Parse(u.URL); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
				v.fail(f+".url", "must be an http(s) URL, got %q", u.URL)
			}
			if len(u.Env) > 0 {
				v.fail(f+".env", "applies only to a command upstream")
			}
		default:
			if len(u.Headers) > 0 {
				v.fail(f+".headers", "apply only to a url upstream")
			}
		}
		if u.Tasks != "auto" && u.Tasks != "off" {
			v.fail(f+".tasks", "must be auto or off, got %q", u.Tasks)
		}
		if u.Timeout < 0 {
			v.fail(f+".timeout", "cannot be negative")
		}
		for _, name := range sortedKeys(u.Tools) {
			validateTool(v, fmt.Sprintf("%s.tools.%s", f, name), u.Tools[name])
		}
	}
}

func validateTool(v *validator, f string, t *Tool) {
	if t == nil {
		v.fail(f, "is empty")
		return
	}
	if t.Approval != "required" && t.Approval != "none" {
		v.fail(f+".approval", "must be required or none, got %q", t.Approval)
	}
	if t.RetryPolicy != RetryLookupThenAttach && t.RetryPolicy != RetryNoAutomaticResend {
		v.fail(f+".retry_policy", "must be %s or %s, got %q", RetryLookupThenAttach, RetryNoAutomaticResend, t.RetryPolicy)
	}
	c := t.Contract
	if !t.Consequential {
		if t.Approval == "required" {
			v.fail(f+".approval", "applies only to a consequential tool")
		}
		return
	}
	if t.RetryPolicy == RetryLookupThenAttach && c.Lookup == nil {
		v.fail(f+".retry_policy", "lookup_then_attach needs contract.lookup: without a lookup the gateway cannot know whether a lost send started work; set retry_policy: no_automatic_resend or configure the lookup")
	}
	if t.DeriveOperationID < 0 {
		v.fail(f+".derive_operation_id", "cannot be negative")
	}
	k := c.Key
	set := 0
	for _, s := range []string{k.Argument, k.Meta, k.Header} {
		if s != "" {
			set++
		}
	}
	if set > 1 {
		v.fail(f+".contract.key", "set one of argument, meta or header, not %d", set)
	}
	if t.Approval == "required" && c.Cost.Estimate == nil && c.Cost.EstimateTool == nil {
		v.fail(f+".contract.cost", "an approval-gated tool needs an estimate (a fixed estimate or an estimate_tool) to reserve against the ceiling")
	}
	if e := c.Cost.Estimate; e != nil && e.Micros < 0 {
		v.fail(f+".contract.cost.estimate", "cannot be negative")
	}
	if et := c.Cost.EstimateTool; et != nil {
		requireCall(v, f+".contract.cost.estimate_tool", et.Call)
		if et.Field == "" {
			v.fail(f+".contract.cost.estimate_tool.field", "is required")
		}
	}
	if l := c.Lookup; l != nil {
		p := f + ".contract.lookup"
		requireCall(v, p, l.Call)
		if l.StatusField == "" {
			v.fail(p+".status_field", "is required")
		}
		checkStatuses(v, p+".statuses", l.Statuses, LookupAnswers, true)
		if l.NotFoundSafeAfter != nil && *l.NotFoundSafeAfter < 0 {
			v.fail(p+".not_found_safe_after", "cannot be negative")
		}
	}
	if fe := c.Fetch; fe != nil {
		p := f + ".contract.fetch"
		requireCall(v, p, fe.Call)
		if fe.StatusField == "" {
			v.fail(p+".status_field", "is required")
		}
		checkStatuses(v, p+".statuses", fe.Statuses, FetchAnswers, true)
	}
	if ch := c.Charges; ch != nil {
		p := f + ".contract.charges"
		requireCall(v, p, ch.Call)
		for name, val := range map[string]string{"list_field": ch.ListField, "id_field": ch.IDField, "amount_field": ch.AmountField, "status_field": ch.StatusField} {
			if val == "" {
				v.fail(p+"."+name, "is required")
			}
		}
		checkStatuses(v, p+".statuses", ch.Statuses, ChargeAnswers, false)
	}
	if cn := c.Cancel; cn != nil {
		requireCall(v, f+".contract.cancel", cn.Call)
	}
}

func requireCall(v *validator, f string, c Call) {
	if c.Tool == "" {
		v.fail(f+".tool", "is required")
	}
	for k, val := range c.Arguments {
		s, ok := val.(string)
		if !ok || !strings.HasPrefix(s, "{") {
			continue
		}
		if s != "{operation_id}" && s != "{job_id}" && !strings.HasPrefix(s, "{argument:") {
			v.fail(f+".arguments."+k, "unknown placeholder %q (known: {operation_id}, {job_id}, {argument:NAME})", s)
		}
	}
}

func checkStatuses(v *validator, f string, m map[string][]string, allowed []string, required bool) {
	if len(m) == 0 {
		if required {
			v.fail(f, "is required: map each of %s to the provider's status strings", strings.Join(allowed, ", "))
		}
		return
	}
	seen := map[string]string{}
	for _, answer := range sortedKeys(m) {
		if !slices.Contains(allowed, answer) {
			v.fail(f+"."+answer, "is not one of %s", strings.Join(allowed, ", "))
		}
		for _, s := range m[answer] {
			if prev, dup := seen[s]; dup {
				v.fail(f+"."+answer, "provider status %q is also mapped to %s", s, prev)
			}
			seen[s] = answer
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func splitHostPort(addr string) (string, int, error) {
	i := strings.LastIndex(addr, ":")
	if i < 0 {
		return "", 0, fmt.Errorf("%q has no port", addr)
	}
	port, err := strconv.Atoi(addr[i+1:])
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("%q has no valid port", addr)
	}
	return addr[:i], port, nil
}

// lineIndex maps field paths as validate spells them (upstreams[0].tools.x)
// to their line in the file.
func lineIndex(root *yaml.Node) map[string]int {
	out := map[string]int{}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				out[p] = k.Line
				walk(n.Content[i+1], p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				p := fmt.Sprintf("%s[%d]", path, i)
				out[p] = c.Line
				walk(c, p)
			}
		}
	}
	walk(root, "")
	return out
}
