package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"reflect"
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
// known, and the reason. Field is empty for a mistake that belongs to no
// field, such as broken YAML syntax or an unset ${VAR}.
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
	if e.Field == "" {
		return fmt.Sprintf("%s: %s", loc, e.Reason)
	}
	return fmt.Sprintf("%s: %s: %s", loc, e.Field, e.Reason)
}

// Unwrap makes errors.Is(err, ErrInvalid) hold.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// Load reads and validates the file at path, expanding ${VAR} from the
// process environment.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read configuration: %w", err)
	}
	return Parse(bytes.NewReader(b), path, os.LookupEnv)
}

// Parse reads YAML from r, applies defaults and validates. lookupEnv
// expands ${VAR} references: the substitution is textual and happens before
// the YAML is parsed, comments included, and a variable it does not know is
// an error. A nil lookupEnv leaves references as written.
func Parse(r io.Reader, file string, lookupEnv func(string) (string, bool)) (*Config, error) {
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	}
	v := &validator{file: file}
	if lookupEnv != nil {
		raw = v.expandEnv(raw, lookupEnv)
		if len(v.errs) > 0 {
			return nil, errors.Join(v.errs...)
		}
	}
	var root yaml.Node
	if err := yaml.Unmarshal(raw, &root); err != nil {
		return nil, syntaxError(file, err)
	}
	v.shape(&root, reflect.TypeFor[Config](), "", 0)
	if len(v.errs) > 0 {
		return nil, errors.Join(v.errs...)
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	c := &Config{}
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		// shape has looked at every field the decoder reads; this is a
		// construct it does not follow, such as a merge key.
		return nil, &FieldError{File: file, Reason: yamlReason(err)}
	}
	c.File = file
	c.applyDefaults()
	v.lines = lineIndex(&root)
	c.validate(v)
	if len(v.errs) > 0 {
		return nil, errors.Join(v.errs...)
	}
	return c, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxError turns the YAML parser's complaint into a FieldError with the
// line it names.
func syntaxError(file string, err error) error {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &FieldError{File: file, Line: line, Reason: "YAML syntax: " + m[2]}
	}
	return &FieldError{File: file, Reason: "YAML syntax: " + strings.TrimPrefix(err.Error(), "yaml: ")}
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandEnv replaces ${VAR} references in b; each unset variable is an
// error naming it and its line.
func (v *validator) expandEnv(b []byte, lookupEnv func(string) (string, bool)) []byte {
	var out bytes.Buffer
	last := 0
	for _, m := range envRef.FindAllSubmatchIndex(b, -1) {
		name := string(b[m[2]:m[3]])
		out.Write(b[last:m[0]])
		last = m[1]
		val, ok := lookupEnv(name)
		if !ok {
			line := 1 + bytes.Count(b[:m[0]], []byte("\n"))
			v.errs = append(v.errs, &FieldError{File: v.file, Line: line,
				Reason: fmt.Sprintf("${%s} is not set in the environment; set it (it may be empty) or remove the reference", name)})
			continue
		}
		out.WriteString(val)
	}
	out.Write(b[last:])
	return out.Bytes()
}

// shape checks that node n can be decoded into type t before the decoder
// runs, so that an unknown field or a value of the wrong kind is reported
// under its path and line rather than as the decoder's message about Go
// types. line is the line of the key that holds n, if any.
func (v *validator) shape(n *yaml.Node, t reflect.Type, path string, line int) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.DocumentNode {
		for _, c := range n.Content {
			v.shape(c, t, path, line)
		}
		return
	}
	if line == 0 {
		line = n.Line
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return
	}
	t = derefType(t)
	switch {
	case t == reflect.TypeFor[time.Duration]():
		var d time.Duration
		if n.Kind != yaml.ScalarNode {
			v.failAt(path, line, "must be a duration such as 30s, 5m or 1h, got %s", describeNode(n))
		} else if err := n.Decode(&d); err != nil {
			if _, ferr := strconv.ParseFloat(n.Value, 64); ferr == nil {
				v.failAt(path, line, "%s is not a duration; write %ss", n.Value, n.Value)
			} else {
				v.failAt(path, line, "%q is not a duration; write it like 30s, 5m or 1h", n.Value)
			}
		}
		return
	case t == reflect.TypeFor[money.Amount]():
		var a money.Amount
		if n.Kind != yaml.ScalarNode {
			v.failAt(path, line, "must be a decimal amount such as \"18.00\", got %s", describeNode(n))
		} else if err := n.Decode(&a); err != nil {
			v.failAt(path, line, "%s", yamlReason(err))
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		fields := yamlFields(t)
		if n.Kind != yaml.MappingNode {
			if path == "" {
				v.failAt(path, line, "the file must be a mapping of fields (%s), got %s", strings.Join(fields.names, ", "), describeNode(n))
				return
			}
			v.failAt(path, line, "must be a mapping of fields (%s), got %s", strings.Join(fields.names, ", "), describeNode(n))
			return
		}
		v.eachEntry(n, path, func(key *yaml.Node, val *yaml.Node, p string) {
			ft, ok := fields.types[key.Value]
			if !ok {
				v.failAt(p, key.Line, "unknown field (known: %s)", strings.Join(fields.names, ", "))
				return
			}
			v.shape(val, ft, p, key.Line)
		})
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			v.failAt(path, line, "must be a mapping, got %s", describeNode(n))
			return
		}
		v.eachEntry(n, path, func(key *yaml.Node, val *yaml.Node, p string) {
			v.shape(val, t.Elem(), p, key.Line)
		})
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			v.failAt(path, line, "must be a list, got %s", describeNode(n))
			return
		}
		for i, c := range n.Content {
			v.shape(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), c.Line)
		}
	case reflect.Interface:
		// Contract call arguments: any YAML value is sent as written.
	default:
		if n.Kind != yaml.ScalarNode {
			v.failAt(path, line, "must be %s, got %s", describeKind(t), describeNode(n))
			return
		}
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			v.failAt(path, line, "%s is not %s", describeNode(n), describeKind(t))
		}
	}
}

// eachEntry calls f for every key of mapping n with the key's path, and
// reports keys given twice. Merge keys (<<) are left to the decoder.
func (v *validator) eachEntry(n *yaml.Node, path string, f func(key, val *yaml.Node, p string)) {
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		if key.Value == "<<" {
			continue
		}
		p := key.Value
		if path != "" {
			p = path + "." + key.Value
		}
		if first, dup := seen[key.Value]; dup {
			v.failAt(p, key.Line, "is given twice (first at line %d)", first)
			continue
		}
		seen[key.Value] = key.Line
		f(key, val, p)
	}
}

// derefType is t without its pointers.
func derefType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// structFields are the YAML fields of a struct type, in declaration order,
// with the fields of inlined structs in place.
type structFields struct {
	names []string
	types map[string]reflect.Type
}

func yamlFields(t reflect.Type) structFields {
	fs := structFields{types: map[string]reflect.Type{}}
	var add func(t reflect.Type)
	add = func(t reflect.Type) {
		for i := range t.NumField() {
			sf := t.Field(i)
			if !sf.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
			switch {
			case name == "-":
				continue
			case opts == "inline":
				add(derefType(sf.Type))
				continue
			case name == "":
				name = strings.ToLower(sf.Name)
			}
			fs.names = append(fs.names, name)
			fs.types[name] = sf.Type
		}
	}
	add(t)
	return fs
}

// describeKind names what a scalar of type t must look like, for messages.
func describeKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a string"
}

// describeNode names what a YAML node holds, for messages.
func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	if n.ShortTag() == "!!str" {
		return strconv.Quote(n.Value)
	}
	return n.Value
}

// yamlReason is a decoder error without its "yaml:" and line prefixes.
func yamlReason(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		reasons := make([]string, len(te.Errors))
		for i, e := range te.Errors {
			if _, rest, ok := strings.Cut(e, ": "); ok && strings.HasPrefix(e, "line ") {
				e = rest
			}
			reasons[i] = e
		}
		return strings.Join(reasons, "; ")
	}
	return strings.TrimPrefix(err.Error(), "yaml: ")
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
		if len(j.Algorithms) == 0 {
			j.Algorithms = []string{"RS256", "ES256"}
		}
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

// fail reports field as invalid, at its line in the file, or at the line
// of the nearest enclosing field when it is not written there.
func (v *validator) fail(field, format string, args ...any) {
	line := 0
	for p := field; p != "" && line == 0; p = parentPath(p) {
		line = v.lines[p]
	}
	v.failAt(field, line, format, args...)
}

// parentPath is the path of the field that holds field: "a.b[2]" for
// "a.b[2].c", "a.b" for "a.b[2]", "" for "a".
func parentPath(field string) string {
	i := strings.LastIndexAny(field, ".[")
	if i < 0 {
		return ""
	}
	return field[:i]
}

func (v *validator) failAt(field string, line int, format string, args ...any) {
	v.errs = append(v.errs, &FieldError{File: v.file, Field: field, Line: line, Reason: fmt.Sprintf(format, args...)})
}

// given reports whether field was written in the file (before defaults).
func (v *validator) given(field string) bool {
	_, ok := v.lines[field]
	return ok
}

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
		{"wait", c.Wait}, {"task_ttl", c.TaskTTL}, {"poll_interval", c.PollInterval}, {"retention", c.Retention},
		{"worker.lease", c.Worker.Lease}, {"worker.sweep", c.Worker.Sweep}, {"worker.upstream_poll", c.Worker.UpstreamPoll},
		{"worker.reconcile", c.Worker.Reconcile}, {"worker.fetch_poll", c.Worker.FetchPoll},
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
	if c.Worker.Workers < 1 {
		v.fail("worker.workers", "must be at least 1 (got %d)", c.Worker.Workers)
	}
	if j := c.Auth.JWT; j != nil {
		validateJWT(v, j)
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
	case u.Scheme == "http" && isLoopback(u.Hostname()):
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

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
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
		// A pass-through tool never becomes an operation, so none of the
		// operation's policy would ever apply; saying so beats ignoring it.
		if t.Approval == "required" {
			v.fail(f+".approval", "applies only to a consequential tool")
		}
		for _, name := range []string{"retry_policy", "derive_operation_id", "secret_arguments", "require_task", "wait", "contract"} {
			if v.given(f + "." + name) {
				v.fail(f+"."+name, "applies only to a consequential tool; set consequential: true, or remove it")
			}
		}
		return
	}
	if t.RetryPolicy == RetryLookupThenAttach && c.Lookup == nil {
		v.fail(f+".retry_policy", "lookup_then_attach needs contract.lookup: without a lookup the gateway cannot know whether a lost send started work; set retry_policy: no_automatic_resend or configure the lookup")
	}
	if t.DeriveOperationID < 0 {
		v.fail(f+".derive_operation_id", "cannot be negative")
	}
	if t.Wait < 0 {
		v.fail(f+".wait", "cannot be negative")
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
	if c.Cost.Estimate != nil && c.Cost.EstimateTool != nil {
		v.fail(f+".contract.cost", "set estimate or estimate_tool, not both")
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
		if set == 0 {
			for _, name := range sortedKeys(l.Arguments) {
				if l.Arguments[name] == "{operation_id}" {
					v.fail(p+".arguments."+name, "looks the operation up by {operation_id}, but contract.key does not pass the operation ID to the provider, so the lookup could never find anything; set contract.key (argument, meta or header) or look up by something the provider receives")
				}
			}
		}
		if l.StatusField == "" {
			v.fail(p+".status_field", "is required")
		}
		if l.JobIDField == "" && l.JobsField == "" {
			v.fail(p+".job_id_field", "is required (or jobs_field): a lookup that finds a job must say which one, or the gateway cannot attach to it")
		}
		checkStatuses(v, p+".statuses", l.Statuses, lookupAnswers(), true)
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
		checkStatuses(v, p+".statuses", fe.Statuses, fetchAnswers(), true)
	}
	if ch := c.Charges; ch != nil {
		p := f + ".contract.charges"
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
		requireCall(v, f+".contract.cancel", cn.Call)
	}
}

func requireCall(v *validator, f string, c Call) {
	if c.Tool == "" {
		v.fail(f+".tool", "is required")
	}
	for _, k := range sortedKeys(c.Arguments) {
		s, ok := c.Arguments[k].(string)
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
