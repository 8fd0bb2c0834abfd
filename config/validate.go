package config

import (
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/taskgate/taskgate/internal/inert"
	"github.com/taskgate/taskgate/internal/loopback"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
)

var upstreamName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)

// lookupAnswers are the classes a provider's lookup answer maps to.
func lookupAnswers() []string {
	return []string{"not_found", "accepted", "running", "completed", "failed", "cancelled"}
}

// fetchAnswers are the classes a fetched job status maps to.
func fetchAnswers() []string {
	return []string{"accepted", "running", "completed", "failed", "cancelled"}
}

// chargeAnswers are the classes a provider's charge status maps to.
func chargeAnswers() []string { return []string{"pending", "final", "refunded"} }

// jwtAlgorithms are the signature algorithms a JWT may use: asymmetric
// ones only, since a shared secret cannot be published in a JWKS.
func jwtAlgorithms() []string {
	return []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"}
}

// maxLeeway bounds the clock skew allowed on a JWT's times.
const maxLeeway = 5 * time.Minute

// validate checks the defaulted configuration and reports each invalid
// field to v.
func (c *Config) validate(v *validator) {
	if _, _, err := splitHostPort(c.Listen); err != nil {
		v.fail("listen", "%v (want host:port, e.g. 127.0.0.1:8931)", err)
	}
	if err := checkPublicURL(c.PublicURL); err != nil {
		if v.given("public_url") {
			v.fail("public_url", "%v", err)
		} else {
			v.fail("listen", "public_url defaults to http://%s, which cannot be used: %v; set public_url to the URL clients use", c.Listen, err)
		}
	}
	if !strings.HasPrefix(c.Database, "sqlite:") && !strings.HasPrefix(c.Database, "postgres://") && !strings.HasPrefix(c.Database, "postgresql://") {
		v.fail("database", "must start with sqlite: or postgres://")
	}
	positive := []struct {
		field string
		d     time.Duration
	}{
		{"wait", c.Wait}, {"task_ttl", c.TaskTTL}, {"approval_request_ttl", c.ApprovalRequestTTL}, {"poll_interval", c.PollInterval}, {retentionField(v), c.Retention.OperationIDs},
		{"worker.lease", c.Worker.Lease}, {"worker.sweep", c.Worker.Sweep}, {"worker.upstream_poll", c.Worker.UpstreamPoll},
		{"worker.reconcile", c.Worker.Reconcile}, {"worker.fetch_poll", c.Worker.FetchPoll},
		{"worker.job_retention", c.Worker.JobRetention},
	}
	for _, p := range positive {
		if p.d < 0 {
			v.fail(p.field, "cannot be negative (got %s)", p.d)
		}
	}
	if c.Worker.FetchPoll >= 0 && c.Worker.FetchPoll < time.Millisecond {
		v.fail("worker.fetch_poll", "must be at least 1ms (got %s)", c.Worker.FetchPoll)
	}
	if c.Worker.Lease >= 0 && c.Worker.Lease < 100*time.Millisecond {
		v.fail("worker.lease", "must be at least 100ms (got %s)", c.Worker.Lease)
	}
	if c.MaxBodyBytes < 1024 {
		v.fail("max_body_bytes", "must be at least 1024 (got %d)", c.MaxBodyBytes)
	}
	for i, o := range c.AllowedOrigins {
		if err := checkOrigin(o); err != nil {
			v.fail(fmt.Sprintf("allowed_origins[%d]", i), "%v", err)
		}
	}
	c.Retention.validate(v)
	if c.Worker.Workers < 1 {
		v.fail("worker.workers", "must be at least 1 (got %d)", c.Worker.Workers)
	}
	if j := c.Auth.JWT; j != nil {
		validateJWT(v, j)
	}
	if !*c.Auth.APIKeys && c.Auth.JWT == nil {
		v.fail("auth", "accepts no credentials: enable api_keys or configure jwt")
	}
	c.Secrets.validate(v)
	c.Limits.validate(v)
	c.Telemetry.validate(v)

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
			pu, err := url.Parse(u.URL)
			switch {
			case err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "":
				v.fail(f+".url", "must be an http(s) URL, got %q", inert.URL(u.URL))
			// The URL goes with every request, a tenant's too: a
			// credential in it would reach the provider under every
			// tenant. Not shown: it may be a credential.
			case len(u.TenantHeaders) > 0 && pu.User != nil:
				v.fail(f+".url", "carries a user name or password, which would go with every tenant's requests; move the credential into tenant_headers (or headers) and remove it from the url")
			case len(u.TenantHeaders) > 0 && (pu.RawQuery != "" || pu.ForceQuery):
				v.fail(f+".url", "carries a query string, which would go with every tenant's requests; move the credential into tenant_headers (or headers) and remove the query from the url")
			}
			if len(u.Env) > 0 {
				v.fail(f+".env", "applies only to a command upstream")
			}
			if v.given(f + ".max_restarts_per_minute") {
				v.fail(f+".max_restarts_per_minute", "applies only to a command upstream")
			}
		default:
			if len(u.Headers) > 0 {
				v.fail(f+".headers", "apply only to a url upstream")
			}
			if len(u.TenantHeaders) > 0 {
				v.fail(f+".tenant_headers", "apply only to a url upstream: a command upstream is one process for every tenant and takes no headers, so it cannot tell tenants apart; serve it over HTTP, or run one upstream per tenant")
			}
		}
		validateTenantHeaders(v, f, u)
		if u.Tasks != "auto" && u.Tasks != "off" {
			v.fail(f+".tasks", "must be auto or off, got %q", u.Tasks)
		}
		if u.Timeout < 0 {
			v.fail(f+".timeout", "cannot be negative")
		}
		if u.MaxRestartsPerMinute < 1 {
			v.fail(f+".max_restarts_per_minute", "must be at least 1 (got %d)", u.MaxRestartsPerMinute)
		}
		if !u.Contracts.Valid() {
			v.fail(f+".contracts", "must be %s or %s, got %q", ContractsConfigured, ContractsDiscover, u.Contracts)
		}
		called := map[string]bool{}
		for _, t := range u.Tools {
			if t != nil && t.Consequential {
				for _, name := range t.Contract.Tools() {
					called[name] = true
				}
			}
		}
		for _, name := range slices.Sorted(maps.Keys(u.Tools)) {
			validateTool(v, fmt.Sprintf("%s.tools.%s", f, name), u.Tools[name])
			if t := u.Tools[name]; t != nil && t.Consequential {
				checkContractCalls(v, fmt.Sprintf("%s.tools.%s.contract", f, name), u, &t.Contract)
			}
			// What a declared contract calls is known only once it is
			// listed.
			if t := u.Tools[name]; t != nil && t.Expose && !called[name] && u.Contracts != ContractsDiscover {
				v.fail(fmt.Sprintf("%s.tools.%s.expose", f, name), "applies only to a tool a provider contract of this upstream calls (lookup, fetch, charges, cancel or estimate_tool), which is hidden from clients unless exposed; every other tool is listed anyway, so remove it")
			}
		}
	}
}

// validateTenantHeaders checks an upstream's tenant headers and reads
// their values from the environment.
func validateTenantHeaders(v *validator, f string, u *Upstream) {
	switch {
	case len(u.TenantHeaders) == 0 && u.UnlistedTenants != "":
		v.fail(f+".unlisted_tenants", "applies only to an upstream with tenant_headers")
	case len(u.TenantHeaders) == 0:
	case u.UnlistedTenants != UnlistedRefuse && u.UnlistedTenants != UnlistedShared:
		v.fail(f+".unlisted_tenants", "must be refuse or shared, got %q", u.UnlistedTenants)
	}
	for _, tenant := range slices.Sorted(maps.Keys(u.TenantHeaders)) {
		tf := fmt.Sprintf("%s.tenant_headers.%s", f, tenant)
		hs := u.TenantHeaders[tenant]
		if err := ledger.CheckTenant(tenant); err != nil {
			// Quoted: the name may hold what a terminal would act on.
			v.fail(fmt.Sprintf("%s.tenant_headers.%q", f, tenant), "names a tenant no credential can carry: %v; write the tenant as its keys are issued for", err)
		} else if strings.TrimSpace(tenant) == "" {
			v.fail(tf, "names no tenant; write the tenant as its keys are issued for")
		}
		// Header names are one whatever their case: two would leave which
		// value is sent to chance.
		byLower := map[string][]string{}
		for _, name := range slices.Sorted(maps.Keys(hs)) {
			byLower[strings.ToLower(name)] = append(byLower[strings.ToLower(name)], name)
		}
		for _, lower := range slices.Sorted(maps.Keys(byLower)) {
			if names := byLower[lower]; len(names) > 1 {
				v.fail(tf, "names the header %s twice (%s); header names are one whatever their case, so keep one", names[0], strings.Join(names, ", "))
			}
		}
		if len(hs) == 0 {
			v.fail(tf, "lists no headers; give the tenant's credential, for example Authorization: {env: ACME_TOKEN}, or remove the entry")
		}
		for _, name := range slices.Sorted(maps.Keys(hs)) {
			hf := tf + "." + name
			h := hs[name]
			if !headerName.MatchString(name) {
				v.fail(hf, "%q is not an HTTP header name", name)
			}
			switch {
			case h == nil || h.Env == "" && h.Sealed == "":
				v.fail(hf, "needs env (the environment variable that holds the value) or sealed (the value sealed with taskgate secrets-key seal); a plain value is never written in the file")
				continue
			case h.Env != "" && h.Sealed != "":
				v.fail(hf, "has both env and sealed; keep one")
				continue
			case h.Sealed != "":
				continue // opened with the secrets keys (OpenTenantHeaders)
			}
			val, ok := v.lookupEnv(h.Env)
			switch {
			case !ok:
				v.fail(hf+".env", "names %s, which is not set in the environment; set it to tenant %s's credential, or remove the entry", h.Env, tenant)
			case val == "":
				v.fail(hf+".env", "names %s, which is empty; set it to tenant %s's credential, or remove the entry", h.Env, tenant)
			case strings.ContainsAny(val, "\r\n\x00"):
				// Not shown: the value is a credential.
				v.fail(hf+".env", "names %s, whose value holds a line break or NUL, which no header value may; set it to the credential alone", h.Env)
			default:
				h.value = val
			}
		}
	}
}

// headerName is an HTTP header field name (RFC 9110 token).
var headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// validateJWT applies the checks the authenticator would make at start, so
// that they are reported with the file, line and field.
func validateJWT(v *validator, j *JWT) {
	if j.Issuer == "" {
		v.fail("auth.jwt.issuer", "is required (the iss your authorization server puts in tokens)")
	} else if err := checkServerURL(j.Issuer); err != nil {
		v.fail("auth.jwt.issuer", "%v; it is advertised as the authorization server", err)
	}
	if j.Audience == "" {
		v.fail("auth.jwt.audience", "is required (usually public_url followed by /mcp)")
	}
	if j.JWKSURL == "" {
		v.fail("auth.jwt.jwks_url", "is required (the issuer's jwks_uri)")
	} else if err := checkServerURL(j.JWKSURL); err != nil {
		v.fail("auth.jwt.jwks_url", "%v", err)
	}
	for i, alg := range j.Algorithms {
		f := fmt.Sprintf("auth.jwt.algorithms[%d]", i)
		switch {
		case slices.Contains(jwtAlgorithms(), alg):
		case strings.EqualFold(alg, "none"):
			v.fail(f, `"none" is never accepted: unsigned tokens prove nothing`)
		case strings.HasPrefix(strings.ToUpper(alg), "HS"):
			v.fail(f, "%s is a shared-secret algorithm and is not accepted; use RS256 or ES256", alg)
		default:
			v.fail(f, "%q is not supported; use one of %s", alg, strings.Join(jwtAlgorithms(), ", "))
		}
	}
	if j.Leeway < 0 || j.Leeway > maxLeeway {
		v.fail("auth.jwt.leeway", "must be between 0s and %s (got %s)", maxLeeway, j.Leeway)
	}
}

// checkOrigin accepts a browser origin as an Origin header spells it:
// http or https, a host, an optional port, and nothing after.
func checkOrigin(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case raw == "*":
		return fmt.Errorf("%q would let every web page call the gateway; list each origin, such as https://console.example.com", raw)
	case err != nil:
		return fmt.Errorf("%q is not a URL (%v); write scheme://host[:port], such as https://console.example.com", raw, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%q is not an http or https origin; write scheme://host[:port], such as https://console.example.com", raw)
	case u.Host == "" || u.Hostname() == "" || u.User != nil || u.Opaque != "":
		return fmt.Errorf("%q names no host; write scheme://host[:port], such as https://console.example.com", raw)
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(raw, "?") || strings.HasSuffix(raw, "#"):
		return fmt.Errorf("%q has a path, query or fragment, which an origin never has; write %s://%s", raw, u.Scheme, u.Host)
	}
	return nil
}

// checkServerURL accepts an absolute https URL, or an http URL on a
// loopback host (for local use and tests).
func checkServerURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil {
		return fmt.Errorf("%q must be an absolute URL with a host and no user info", raw)
	}
	switch {
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && loopback.Host(u.Hostname()):
		return nil
	case u.Scheme == "http":
		return fmt.Errorf("%q must use https (http is allowed only on a loopback host)", raw)
	}
	return fmt.Errorf("%q must use https", raw)
}

// checkPublicURL is checkServerURL for the gateway's own URL, which also
// may carry no query or fragment: PUBLIC_URL/mcp names the resource.
func checkPublicURL(raw string) error {
	if err := checkServerURL(raw); err != nil {
		return err
	}
	if u, _ := url.Parse(raw); u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q must have no query or fragment", raw)
	}
	return nil
}

// validateCost checks how a contract's calls are priced and how many
// remote jobs each starts; f is the contract's path.
func validateCost(v *validator, f string, c *Contract) {
	cost := c.Cost
	p := f + ".cost"
	if priced := cost.estimates(); priced > 1 {
		v.fail(p, "set one of estimate, estimate_per_job or estimate_tool, not %d", priced)
	}
	for _, e := range []struct {
		name   string
		amount *money.Amount
	}{{"estimate", cost.Estimate}, {"estimate_per_job", cost.EstimatePerJob}} {
		if e.amount != nil && e.amount.Micros < 0 {
			v.fail(p+"."+e.name, "cannot be negative")
		}
	}
	if et := cost.EstimateTool; et != nil {
		requireCall(v, p+".estimate_tool", et.Call)
		if et.Field == "" {
			v.fail(p+".estimate_tool.field", "is required")
		}
		if et.JobsField != "" && cost.JobsArgument != "" {
			v.fail(p+".jobs_argument", "counts the remote jobs, and so does estimate_tool.jobs_field; set one of them")
		}
	}
	if cost.EstimatePerJob != nil && cost.JobsArgument == "" {
		v.fail(p+".estimate_per_job", "prices each remote job, so jobs_argument must name the argument that counts them")
	}
	if cost.FansOut() && c.RemoteJobsField == "" {
		v.fail(f+".remote_jobs_field", "is required: the cost counts the remote jobs a call starts, so the contract must say where the call's result lists them")
	}
}

// estimates counts the ways of pricing a call the cost sets.
func (c *Cost) estimates() int {
	n := 0
	for _, set := range []bool{c.Estimate != nil, c.EstimatePerJob != nil, c.EstimateTool != nil} {
		if set {
			n++
		}
	}
	return n
}

func validateTool(v *validator, f string, t *Tool) {
	if t == nil {
		v.fail(f, "is empty")
		return
	}
	if !t.Approval.Valid() {
		v.fail(f+".approval", "must be %s or %s, got %q", ledger.ApprovalRequired, ledger.ApprovalNone, t.Approval)
	}
	for i, w := range t.ApproveBy {
		switch {
		case !w.Valid():
			v.fail(fmt.Sprintf("%s.approve_by[%d]", f, i), "must be %s or %s, got %q", ledger.ApproveByRequest, ledger.ApproveByElicitation, w)
		case slices.Index(t.ApproveBy, w) < i:
			v.fail(fmt.Sprintf("%s.approve_by[%d]", f, i), "lists %s twice", w)
		}
	}
	// A tool that takes a declared contract gets its retry policy's
	// default when the contract is adopted.
	if !t.RetryPolicy.Valid() && !(t.Declared && t.RetryPolicy == "") {
		v.fail(f+".retry_policy", "must be %s or %s, got %q", ledger.RetryLookupThenAttach, ledger.RetryNoAutomaticResend, t.RetryPolicy)
	}
	if !t.ClientCancel.Valid() {
		v.fail(f+".client_cancel", "must be %s or %s, got %q", ledger.ClientCancelHonour, ledger.ClientCancelBeforeSend, t.ClientCancel)
	}
	if !t.Consequential {
		// A pass-through tool never becomes an operation, so none of the
		// operation's policy would ever apply; saying so beats ignoring it.
		if t.Approval == ledger.ApprovalRequired {
			v.fail(f+".approval", "applies only to a consequential tool")
		}
		for _, name := range []string{"approve_by", "elicitation_max_total_cost", "budgets", "retry_policy", "client_cancel", "derive_operation_id", "secret_arguments", "require_task", "wait", "input_before_task", "contract"} {
			if v.given(f + "." + name) {
				v.fail(f+"."+name, "applies only to a consequential tool; set consequential: true, or remove it")
			}
		}
		return
	}
	switch cap := t.ElicitationMaxTotalCost; {
	case cap.Micros < 0:
		v.fail(f+".elicitation_max_total_cost", "cannot be negative; 0 turns approval by a form answer off")
	case cap.Micros > 0 && !slices.Contains(t.ApproveBy, ledger.ApproveByElicitation):
		v.fail(f+".elicitation_max_total_cost", "caps approvals given by a form answer, but approve_by does not list %s; add it, or remove this field", ledger.ApproveByElicitation)
	case cap.Micros > 0 && t.Approval != ledger.ApprovalRequired:
		v.fail(f+".elicitation_max_total_cost", "caps approvals, but the tool needs none (approval: %s); set approval: %s, or remove this field", t.Approval, ledger.ApprovalRequired)
	}
	if t.Budgets != nil && t.Approval != ledger.ApprovalRequired {
		v.fail(f+".budgets", "says whether budgets may stand in for an approval, but the tool needs none (approval: %s); set approval: %s, or remove this field", t.Approval, ledger.ApprovalRequired)
	}
	if t.DeriveOperationID < 0 {
		v.fail(f+".derive_operation_id", "cannot be negative")
	}
	if t.Wait < 0 {
		v.fail(f+".wait", "cannot be negative")
	}
	if t.InputBeforeTask < 0 {
		v.fail(f+".input_before_task", "cannot be negative")
	}
	if t.Declared {
		// Checked with its contract when the contract is adopted.
		return
	}
	validatePolicyContract(v, f, f+".contract", t)
	validateContract(v, f+".contract", &t.Contract)
}

// checkContractCalls refuses a contract (at path f) of a tool of u that
// calls one of u's consequential tools, itself included: the gateway makes
// a contract's calls on its own, to look up, fetch, list charges, cancel
// or estimate, and none of them may start paid work.
func checkContractCalls(v *validator, f string, u *Upstream, c *Contract) {
	for _, name := range c.Tools() {
		if t := u.Tools[name]; t != nil && t.Consequential {
			v.fail(f, "calls %s, a consequential tool of upstream %s; a contract's lookup, fetch, charges, cancel and estimate calls must never start paid work, so name the provider's read-only or cancel tools", inert.Terminal(name), u.Name)
		}
	}
}

// validatePolicyContract checks what a consequential tool's policy asks of
// its contract; tool and contract are their paths.
func validatePolicyContract(v *validator, tool, contract string, t *Tool) {
	if t.RetryPolicy == ledger.RetryLookupThenAttach && t.Contract.Lookup == nil {
		v.fail(subPath(tool, "retry_policy"), "lookup_then_attach needs contract.lookup: without a lookup the gateway cannot know whether a lost send started work; set retry_policy: no_automatic_resend or configure the lookup")
	}
	if t.Approval == ledger.ApprovalRequired && t.Contract.Cost.estimates() == 0 {
		v.fail(subPath(contract, "cost"), "an approval-gated tool needs an estimate (a fixed estimate, an estimate_per_job or an estimate_tool) to reserve against the ceiling")
	}
}

// validateContract checks a provider contract on its own terms, whatever
// the policy of the tool it belongs to, so that a contract written in the
// configuration and one a provider declares (DecodeContract) are held to
// the same rules; f is the contract's path. What a tool's policy asks of
// its contract is validateTool's.
func validateContract(v *validator, f string, c *Contract) {
	k := c.Key
	set := 0
	for _, s := range []string{k.Argument, k.Meta, k.Header} {
		if s != "" {
			set++
		}
	}
	if set > 1 {
		v.fail(f+".key", "set one of argument, meta or header, not %d", set)
	}
	validateCost(v, f, c)
	if l := c.Lookup; l != nil {
		p := f + ".lookup"
		requireCall(v, p, l.Call)
		if set == 0 {
			for _, name := range slices.Sorted(maps.Keys(l.Arguments)) {
				if l.Arguments[name] == "{operation_id}" {
					v.fail(p+".arguments."+name, "looks the operation up by {operation_id}, but contract.key does not pass the operation ID to the provider, so the lookup could never find anything; set contract.key (argument, meta or header) or look up by something the provider receives")
				}
			}
		}
		if l.StatusField == "" {
			v.fail(p+".status_field", "is required")
		}
		if l.RemoteJobIDField == "" && l.JobsField == "" {
			v.fail(p+".remote_job_id_field", "is required (or jobs_field): a lookup that finds a job must say which one, or the gateway cannot attach to it")
		}
		checkStatuses(v, p+".statuses", l.Statuses, lookupAnswers(), true)
		if l.NotFoundSafeAfter != nil && *l.NotFoundSafeAfter < 0 {
			v.fail(p+".not_found_safe_after", "cannot be negative")
		}
	}
	if fe := c.Fetch; fe != nil {
		p := f + ".fetch"
		requireCall(v, p, fe.Call)
		if fe.StatusField == "" {
			v.fail(p+".status_field", "is required")
		}
		checkStatuses(v, p+".statuses", fe.Statuses, fetchAnswers(), true)
	}
	if ch := c.Charges; ch != nil {
		p := f + ".charges"
		requireCall(v, p, ch.Call)
		for _, r := range []struct{ name, value string }{
			{"list_field", ch.ListField}, {"id_field", ch.IDField}, {"amount_field", ch.AmountField}, {"status_field", ch.StatusField},
		} {
			if r.value == "" {
				v.fail(p+"."+r.name, "is required")
			}
		}
		checkStatuses(v, p+".statuses", ch.Statuses, chargeAnswers(), false)
	}
	if cn := c.Cancel; cn != nil {
		requireCall(v, f+".cancel", cn.Call)
	}
}

func requireCall(v *validator, f string, c Call) {
	if c.Tool == "" {
		v.fail(f+".tool", "is required")
	}
	for _, k := range slices.Sorted(maps.Keys(c.Arguments)) {
		s, ok := c.Arguments[k].(string)
		if !ok || !strings.HasPrefix(s, "{") {
			continue
		}
		if s == "{job_id}" {
			// The deprecated spelling: the rest of the gateway sees only the
			// current one.
			v.warn(f+".arguments."+k, "the placeholder {job_id} is deprecated and will be removed in the next release; write {remote_job_id}")
			c.Arguments[k] = "{remote_job_id}"
			continue
		}
		if s != "{operation_id}" && s != "{remote_job_id}" && !strings.HasPrefix(s, "{argument:") {
			v.fail(f+".arguments."+k, "unknown placeholder %q (known: {operation_id}, {remote_job_id}, {argument:NAME})", s)
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
	for _, answer := range slices.Sorted(maps.Keys(m)) {
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

// validate checks that every limit bounds something: a zero left in the
// file took its default, so only a negative one, or one too small to
// serve, is wrong.
func (l *Limits) validate(v *validator) {
	durations := []struct {
		field string
		d     time.Duration
	}{
		{"read_header_timeout", l.ReadHeaderTimeout}, {"read_timeout", l.ReadTimeout},
		{"write_timeout", l.WriteTimeout}, {"idle_timeout", l.IdleTimeout}, {"session_idle", l.SessionIdle},
	}
	for _, p := range durations {
		if p.d < 100*time.Millisecond {
			v.fail("limits."+p.field, "must be at least 100ms (got %s)", p.d)
		}
	}
	if l.ReadHeaderTimeout > l.ReadTimeout {
		v.fail("limits.read_header_timeout", "cannot be longer than limits.read_timeout (%s), which bounds the headers too", l.ReadTimeout)
	}
	counts := []struct {
		field string
		n     int
	}{
		{"max_connections", l.MaxConnections}, {"sessions", l.Sessions}, {"sessions_per_tenant", l.SessionsPerTenant},
		{"streams", l.Streams}, {"streams_per_tenant", l.StreamsPerTenant}, {"calls_per_tenant", l.CallsPerTenant},
		{"call_burst", l.CallBurst}, {"sign_ins_per_minute", l.SignInsPerMinute}, {"jobs_per_tenant", l.JobsPerTenant},
		{"accepts_per_tenant", l.AcceptsPerTenant},
	}
	for _, p := range counts {
		if p.n < 1 {
			v.fail("limits."+p.field, "must be at least 1 (got %d)", p.n)
		}
	}
	if l.CallRate <= 0 {
		v.fail("limits.call_rate", "must be more than 0 calls per second (got %g)", l.CallRate)
	}
	// A refusal held longer than a client's own timeout would look like a
	// hung gateway.
	if l.RefusalDelay < time.Millisecond || l.RefusalDelay > 10*time.Second {
		v.fail("limits.refusal_delay", "must be between 1ms and 10s (got %s)", l.RefusalDelay)
	}
	if l.SessionsPerTenant > l.Sessions {
		v.fail("limits.sessions_per_tenant", "cannot exceed limits.sessions (%d)", l.Sessions)
	}
	if l.StreamsPerTenant > l.Streams {
		v.fail("limits.streams_per_tenant", "cannot exceed limits.streams (%d)", l.Streams)
	}
}

// retentionField names the operation IDs' retention as the file gave it:
// retention alone, or retention.operation_ids.
func retentionField(v *validator) string {
	if v.given("retention.operation_ids") {
		return "retention.operation_ids"
	}
	return "retention"
}

func (r *Retention) validate(v *validator) {
	a := r.Archive
	if a == nil {
		return
	}
	switch {
	case a.After <= 0:
		v.fail("retention.archive.after", "is required: how long after its end an operation is archived, such as 720h")
	case a.After < r.OperationIDs:
		v.fail("retention.archive.after", "is %s, shorter than %s (%s); archive no sooner than operation IDs are released, so that a retry within their retention finds its operation", a.After, retentionField(v), r.OperationIDs)
	}
	if a.Out == "" {
		v.fail("retention.archive.out", "is required: the directory the archive files are written to")
	}
	if a.Every < time.Second {
		v.fail("retention.archive.every", "must be at least 1s (got %s)", a.Every)
	}
	if a.Batch < 1 {
		v.fail("retention.archive.batch", "must be at least 1 (got %d)", a.Batch)
	}
	if a.MaxOperations < 1 {
		v.fail("retention.archive.max_operations", "must be at least 1 (got %d)", a.MaxOperations)
	}
}

func (t *Telemetry) validate(v *validator) {
	for k := range t.Resource {
		if k == "" {
			v.fail("telemetry.resource", "has an empty attribute name")
		}
	}
	tr := t.Traces
	if tr == nil {
		return
	}
	if tr.Endpoint != "" {
		u, err := url.Parse(tr.Endpoint)
		switch {
		case err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
			v.fail("telemetry.traces.endpoint", "must be an http:// or https:// URL with a host, such as http://127.0.0.1:4318")
		case u.User != nil:
			// A credential in the URL would be shown wherever the URL is.
			v.fail("telemetry.traces.endpoint", "carries a user or password; put the collector's credential in telemetry.traces.headers instead")
		case u.RawQuery != "" || u.Fragment != "":
			v.fail("telemetry.traces.endpoint", "must not have a query or fragment")
		}
	}
	switch tr.Protocol {
	case "", TraceProtocolHTTP, TraceProtocolGRPC:
	default:
		v.fail("telemetry.traces.protocol", "is %q; want %s or %s", tr.Protocol, TraceProtocolHTTP, TraceProtocolGRPC)
	}
	for k := range tr.Headers {
		if !httpguts.ValidHeaderFieldName(k) {
			v.fail("telemetry.traces.headers", "%q is not an HTTP header name", k)
		}
	}
	if r := tr.SamplingRatio; r != nil && (*r < 0 || *r > 1 || *r != *r) {
		v.fail("telemetry.traces.sampling_ratio", "must be from 0 to 1 (got %v)", *r)
	}
}
