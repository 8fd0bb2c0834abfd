package config

import (
	"errors"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
)

// env is a lookupEnv over a fixed set of variables.
func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

func exampleText(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("taskgate.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestExampleParses(t *testing.T) {
	c, err := Parse(strings.NewReader(exampleText(t)), "taskgate.example.yaml", env(map[string]string{"HOSTED_TEST_TOKEN": "secret-123"}))
	if err != nil {
		t.Fatalf("Parse(example): %v", err)
	}
	u := c.Upstreams[0]
	if got := u.Headers["Authorization"]; got != "Bearer secret-123" {
		t.Errorf("expanded header = %q, want %q", got, "Bearer secret-123")
	}
	tool := u.Tools["run_suite"]
	if !tool.Consequential || tool.Approval != "required" || tool.RetryPolicy != ledger.RetryLookupThenAttach {
		t.Errorf("run_suite policy = %+v", tool)
	}
	if tool.Contract.Cost.Estimate.String() != "18.00" || tool.Contract.Cost.Estimate.Currency != "USD" {
		t.Errorf("estimate = %v, want 18.00 USD", tool.Contract.Cost.Estimate)
	}
	if tool.Contract.Lookup.Statuses["accepted"][0] != "queued" || tool.Contract.Lookup.NotFoundSafeAfter != nil {
		t.Errorf("lookup = %+v", tool.Contract.Lookup)
	}
	if u.ToolPrefix() != "hosted_test" || !u.IsRequired() {
		t.Errorf("prefix %q required %v, want hosted_test and true", u.ToolPrefix(), u.IsRequired())
	}
	if u.Tools["get_job"].Consequential {
		t.Error("get_job should pass through")
	}
	if c.Worker.FetchPoll != time.Second || c.Worker.Workers != 16 || c.Worker.JobRetention != time.Hour {
		t.Errorf("worker = %+v", c.Worker)
	}
}

// The example's written values are the defaults: parsing it and parsing a
// file with the same upstream but nothing else give the same settings.
func TestExampleShowsDefaults(t *testing.T) {
	full, err := Parse(strings.NewReader(exampleText(t)), "example.yaml", env(map[string]string{"HOSTED_TEST_TOKEN": "x"}))
	if err != nil {
		t.Fatal(err)
	}
	bare, err := Parse(strings.NewReader("upstreams:\n  - name: hosted_test\n    url: http://127.0.0.1:8940/mcp\n"), "bare.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The second upstream shows another kind of provider; the first
	// stands for the defaults.
	if len(full.Upstreams) != 2 || full.Upstreams[1].Contracts != ContractsDiscover || !full.Upstreams[1].Tools["run_suite"].Declared {
		t.Fatalf("the example's second upstream is not one whose run_suite takes the contract it declares")
	}
	full.Upstreams = full.Upstreams[:1]
	for _, c := range []*Config{full, bare} {
		u := c.Upstreams[0]
		if !u.IsRequired() {
			t.Errorf("%s: upstream not required", c.File)
		}
		c.File = ""
		u.Headers, u.Tools, u.Required = nil, nil, nil
	}
	if !reflect.DeepEqual(full, bare) {
		t.Errorf("the example's values differ from the defaults:\nexample  %+v\ndefaults %+v", full, bare)
	}
}

// referenceExample is the first yaml block under "## Every field" in
// docs/configuration.md, the configuration reference.
func referenceExample(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Every field\n")
	if !ok {
		t.Fatal(`docs/configuration.md has no "## Every field" section`)
	}
	if next := strings.Index(section, "\n## "); next >= 0 {
		section = section[:next]
	}
	_, block, ok := strings.Cut(section, "```yaml\n")
	if !ok {
		t.Fatal(`docs/configuration.md's "## Every field" section has no yaml block`)
	}
	block, _, ok = strings.Cut(block, "```\n")
	if !ok {
		t.Fatal("docs/configuration.md's configuration block is not closed")
	}
	return block
}

// TestReferenceExampleIsTheExampleFile checks that the configuration
// reference shows config/taskgate.example.yaml exactly, line by line.
func TestReferenceExampleIsTheExampleFile(t *testing.T) {
	ref := referenceExample(t)
	if _, err := Parse(strings.NewReader(ref), "docs/configuration.md", env(map[string]string{"HOSTED_TEST_TOKEN": "x"})); err != nil {
		t.Fatalf("docs/configuration.md's configuration does not parse: %v", err)
	}
	if file := exampleText(t); ref != file {
		rl, fl := strings.Split(ref, "\n"), strings.Split(file, "\n")
		for i := range min(len(rl), len(fl)) {
			if rl[i] != fl[i] {
				t.Fatalf("docs/configuration.md's configuration differs from config/taskgate.example.yaml at line %d:\nreference %q\nexample   %q", i+1, rl[i], fl[i])
			}
		}
		t.Fatalf("docs/configuration.md's configuration has %d lines, config/taskgate.example.yaml %d", len(rl), len(fl))
	}
}

// commentedField is a commented-out field: "  # name: value" stands for
// "  name: value" one level deeper than the '#'.
var commentedField = regexp.MustCompile(`(?m)^(\s*)# (\s*[a-z_]+:.*)$`)

// TestExampleNamesEveryField checks that every field of Config appears in
// the example, set or commented out, so that a new field cannot go
// undocumented.
func TestExampleNamesEveryField(t *testing.T) {
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(commentedField.ReplaceAllString(exampleText(t), "$1$2")), &root); err != nil {
		t.Fatalf("the example with its commented fields uncommented is not YAML: %v", err)
	}
	shown := map[string]bool{}
	walkFields(root.Content[0], reflect.TypeFor[Config](), "", func(p string) { shown[p] = true })
	var missing []string
	for _, p := range fieldPaths(reflect.TypeFor[Config](), "") {
		if !shown[p] {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		t.Errorf("the example does not show %s", strings.Join(missing, ", "))
	}
}

// fieldPaths lists the path of every field under t: [] for a list
// element, * for a map value.
func fieldPaths(t reflect.Type, path string) []string {
	t = derefType(t)
	var out []string
	switch t.Kind() {
	case reflect.Struct:
		if t == reflect.TypeFor[money.Amount]() {
			return nil
		}
		fs := yamlFields(t)
		for _, name := range fs.names {
			p := join(path, name)
			out = append(out, p)
			out = append(out, fieldPaths(fs.types[name], p)...)
		}
	case reflect.Slice:
		out = fieldPaths(t.Elem(), path+"[]")
	case reflect.Map:
		out = fieldPaths(t.Elem(), path+".*")
	}
	return out
}

// walkFields calls f with the path, spelled as fieldPaths does, of every
// struct field n sets.
func walkFields(n *yaml.Node, t reflect.Type, path string, f func(string)) {
	t = derefType(t)
	switch {
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		fs := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			name := n.Content[i].Value
			if ft, ok := fs.types[name]; ok {
				f(join(path, name))
				walkFields(n.Content[i+1], ft, join(path, name), f)
			}
		}
	case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
		for _, c := range n.Content {
			walkFields(c, t.Elem(), path+"[]", f)
		}
	case t.Kind() == reflect.Map && n.Kind == yaml.MappingNode:
		for i := 1; i < len(n.Content); i += 2 {
			walkFields(n.Content[i], t.Elem(), path+".*", f)
		}
	}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func TestDefaults(t *testing.T) {
	c, err := Parse(strings.NewReader("upstreams:\n  - name: a\n    url: http://127.0.0.1:1/mcp\n    prefix: \"\"\n"), "t.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:8931" || c.Database != "sqlite:./taskgate.db" || c.Wait != 30*time.Second || c.PublicURL != "http://127.0.0.1:8931" {
		t.Errorf("defaults = %+v", c)
	}
	if c.Upstreams[0].ToolPrefix() != "" {
		t.Errorf("explicit empty prefix became %q", c.Upstreams[0].ToolPrefix())
	}
	if got := c.Upstreams[0].MaxRestartsPerMinute; got != 5 {
		t.Errorf("max_restarts_per_minute = %d, want the default 5", got)
	}
	if c.ApprovalRequestTTL != time.Hour {
		t.Errorf("approval_request_ttl = %s, want the default 1h", c.ApprovalRequestTTL)
	}
	if !*c.Auth.APIKeys || c.Auth.StdioTenant != "local" {
		t.Errorf("auth defaults = %+v", c.Auth)
	}
	j, err := Parse(strings.NewReader("auth:\n  jwt:\n    issuer: https://id.example.com/\n    audience: a\n    jwks_url: https://id.example.com/jwks\n"), "t.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := j.Auth.JWT; got.TenantClaim != "sub" || got.Leeway != 30*time.Second || !slices.Equal(got.Algorithms, []string{"RS256", "ES256"}) {
		t.Errorf("jwt defaults = %+v, want tenant_claim sub, leeway 30s, algorithms RS256 and ES256", got)
	}
}

func TestInvalid(t *testing.T) {
	const base = "upstreams:\n  - name: up\n    url: http://127.0.0.1:1/mcp\n    tools:\n      t:\n"
	const lookup = "          lookup: {tool: l, status_field: s, statuses: {running: [r]}, arguments: {k: \"{operation_id}\"}}\n"
	tests := []struct {
		name, yaml, want string
	}{
		// What the package doc quotes.
		{"doc example", base + "        consequential: true\n        retry_policy: lookup_then_attach\n", "t.yaml:7: upstreams[0].tools.t.retry_policy: lookup_then_attach needs contract.lookup: "},

		// Shapes and types, before any value is looked at.
		{"unknown field", "listen: 127.0.0.1:1\nlisten_addr: x\n", "t.yaml:2: listen_addr: unknown field (known: listen, database, public_url, max_body_bytes, allowed_origins, wait, task_ttl, approval_request_ttl, poll_interval, retention, control_socket, worker, auth, secrets, upstreams, limits, telemetry)"},
		{"unknown nested field", base + "        consequential: true\n        contract:\n          lookup: {tool: l, stauts_field: s}\n", "t.yaml:8: upstreams[0].tools.t.contract.lookup.stauts_field: unknown field (known: tool, arguments, status_field, remote_job_id_field, jobs_field, statuses, not_found_safe_after)"},
		{"number for a duration", "wait: 30\n", "t.yaml:1: wait: 30 is not a duration; write 30s"},
		{"word for the retention", "retention: long\n", `t.yaml:1: retention: "long" is not a duration; write it like 30s, 5m or 1h`},
		{"negative retention", "retention: -1h\n", "t.yaml:1: retention: cannot be negative (got -1h0m0s)"},
		{"unknown retention field", "retention:\n  ids: 1h\n", "t.yaml:2: retention.ids: unknown field (known: operation_ids, archive)"},
		{"archive without out", "retention:\n  archive:\n    after: 720h\n", "t.yaml:2: retention.archive.out: is required: the directory the archive files are written to"},
		{"archive without after", "retention:\n  archive:\n    out: a\n", "t.yaml:2: retention.archive.after: is required: how long after its end an operation is archived, such as 720h"},
		{"archive before the IDs are released", "retention:\n  operation_ids: 48h\n  archive:\n    after: 24h\n    out: a\n", "t.yaml:4: retention.archive.after: is 24h0m0s, shorter than retention.operation_ids (48h0m0s); archive no sooner than operation IDs are released, so that a retry within their retention finds its operation"},
		{"archive every second at most", "retention:\n  archive:\n    after: 24h\n    out: a\n    every: 10ms\n", "t.yaml:5: retention.archive.every: must be at least 1s (got 10ms)"},
		{"telemetry endpoint not a URL", "telemetry:\n  traces:\n    endpoint: 127.0.0.1:4318\n", "t.yaml:3: telemetry.traces.endpoint: must be an http:// or https:// URL with a host, such as http://127.0.0.1:4318"},
		{"telemetry endpoint with a password", "telemetry:\n  traces:\n    endpoint: http://u:p@127.0.0.1:4318\n", "t.yaml:3: telemetry.traces.endpoint: carries a user or password; put the collector's credential in telemetry.traces.headers instead"},
		{"telemetry endpoint with a query", "telemetry:\n  traces:\n    endpoint: http://127.0.0.1:4318/?key=k\n", "t.yaml:3: telemetry.traces.endpoint: must not have a query or fragment"},
		{"unknown telemetry protocol", "telemetry:\n  traces:\n    protocol: http/json\n", `t.yaml:3: telemetry.traces.protocol: is "http/json"; want http/protobuf or grpc`},
		{"sampling ratio above 1", "telemetry:\n  traces:\n    sampling_ratio: 1.5\n", "t.yaml:3: telemetry.traces.sampling_ratio: must be from 0 to 1 (got 1.5)"},
		{"telemetry header name", "telemetry:\n  traces:\n    headers: {\"bad name\": x}\n", `t.yaml:3: telemetry.traces.headers: "bad name" is not an HTTP header name`},
		{"unknown telemetry field", "telemetry:\n  trace: {}\n", "t.yaml:2: telemetry.trace: unknown field (known: traces, resource)"},
		{"unknown secrets store", "secrets:\n  store: vault\n", `t.yaml:2: secrets.store: "vault" is not encrypted or plaintext`},
		{"key file with plaintext", "secrets:\n  store: plaintext\n  key_file: k\n", "t.yaml:3: secrets.key_file: is set but secrets.store is plaintext"},
		{"word for a duration", "worker:\n  lease: soon\n", `t.yaml:2: worker.lease: "soon" is not a duration; write it like 30s, 5m or 1h`},
		{"word for a number", "worker:\n  workers: many\n", `t.yaml:2: worker.workers: "many" is not a whole number`},
		{"word for a boolean", "auth:\n  api_keys: always\n", `t.yaml:2: auth.api_keys: "always" is not true or false`},
		{"mapping for a list", "upstreams:\n  name: a\n", "t.yaml:1: upstreams: must be a list, got a mapping"},
		{"scalar for a mapping", "worker: fast\n", `t.yaml:1: worker: must be a mapping of fields (lease, sweep, upstream_poll, reconcile, fetch_poll, workers, job_retention), got "fast"`},
		{"list for the file", "- listen\n", "t.yaml:1: the file must be a mapping of fields"},
		{"key given twice", "listen: 127.0.0.1:1\nlisten: 127.0.0.1:2\n", "t.yaml:2: listen: is given twice (first at line 1)"},
		{"bad money", base + "        consequential: true\n        contract:\n          cost: {estimate: \"1e3\"}\n", `t.yaml:8: upstreams[0].tools.t.contract.cost.estimate: invalid amount: "1e3"`},
		{"yaml syntax", "listen: [127.0.0.1\n", "t.yaml:1: YAML syntax: did not find expected ',' or ']'"},

		// Values.
		{"bad listen", "listen: nowhere\n", "t.yaml:1: listen:"},
		{"bad database", "database: mysql://x\n", "database: must start with sqlite: or postgres://"},
		{"public_url without tls", "public_url: http://gw.example.com\n", `t.yaml:1: public_url: "http://gw.example.com" must use https (http is allowed only on a loopback host)`},
		{"default public_url unusable", "listen: 0.0.0.0:8931\n", "t.yaml:1: listen: public_url defaults to http://0.0.0.0:8931, which cannot be used"},
		{"no credentials", "auth:\n  api_keys: false\n", "auth: accepts no credentials"},
		{"negative limit", "limits:\n  sessions_per_tenant: -1\n", "t.yaml:2: limits.sessions_per_tenant: must be at least 1 (got -1)"},
		{"tenant limit above the total", "limits:\n  streams: 10\n  streams_per_tenant: 20\n", "t.yaml:3: limits.streams_per_tenant: cannot exceed limits.streams (10)"},
		{"short read timeout", "limits:\n  read_timeout: 1ms\n", "t.yaml:2: limits.read_timeout: must be at least 100ms (got 1ms)"},
		{"header timeout above the read timeout", "limits:\n  read_timeout: 5s\n  read_header_timeout: 10s\n", "limits.read_header_timeout: cannot be longer than limits.read_timeout (5s)"},
		{"no call rate", "limits:\n  call_rate: -2\n", "t.yaml:2: limits.call_rate: must be more than 0 calls per second (got -2)"},
		{"long refusal delay", "limits:\n  refusal_delay: 30s\n", "t.yaml:2: limits.refusal_delay: must be between 1ms and 10s (got 30s)"},
		{"jwt without issuer", "auth:\n  jwt:\n    audience: a\n    jwks_url: http://127.0.0.1/j\n", "t.yaml:2: auth.jwt.issuer: is required"},
		{"jwt issuer over http", "auth:\n  jwt:\n    issuer: http://id.example.com/\n    audience: a\n    jwks_url: https://id.example.com/j\n", `t.yaml:3: auth.jwt.issuer: "http://id.example.com/" must use https`},
		{"jwks over http", "auth:\n  jwt:\n    issuer: https://id.example.com/\n    audience: a\n    jwks_url: http://id.example.com/j\n", `t.yaml:5: auth.jwt.jwks_url: "http://id.example.com/j" must use https (http is allowed only on a loopback host)`},
		{"jwt shared secret", "auth:\n  jwt:\n    issuer: https://i.example/\n    audience: a\n    jwks_url: https://i.example/j\n    algorithms: [RS256, HS256]\n", "t.yaml:6: auth.jwt.algorithms[1]: HS256 is a shared-secret algorithm and is not accepted"},
		{"jwt none", "auth:\n  jwt:\n    issuer: https://i.example/\n    audience: a\n    jwks_url: https://i.example/j\n    algorithms: [none]\n", `auth.jwt.algorithms[0]: "none" is never accepted`},
		{"jwt unknown algorithm", "auth:\n  jwt:\n    issuer: https://i.example/\n    audience: a\n    jwks_url: https://i.example/j\n    algorithms: [EdDSA]\n", `auth.jwt.algorithms[0]: "EdDSA" is not supported; use one of RS256,`},
		{"jwt leeway too long", "auth:\n  jwt:\n    issuer: https://i.example/\n    audience: a\n    jwks_url: https://i.example/j\n    leeway: 10m\n", "t.yaml:6: auth.jwt.leeway: must be between 0s and 5m0s (got 10m0s)"},
		{"no url or command", "upstreams:\n  - name: up\n", "upstreams[0]: needs a url"},
		{"negative restart budget", "upstreams:\n  - name: up\n    command: [x]\n    max_restarts_per_minute: -1\n", "t.yaml:4: upstreams[0].max_restarts_per_minute: must be at least 1 (got -1)"},
		{"restart budget on a url upstream", "upstreams:\n  - name: up\n    url: http://x/mcp\n    max_restarts_per_minute: 3\n", "t.yaml:4: upstreams[0].max_restarts_per_minute: applies only to a command upstream"},
		{"bad url with credentials", "upstreams:\n  - name: up\n    url: ftp://svc:PASS@x/mcp?api_key=SECRET\n", `upstreams[0].url: must be an http(s) URL, got "ftp://REDACTED:REDACTED@x/mcp?api_key=REDACTED"`},
		{"both url and command", "upstreams:\n  - name: up\n    url: http://x/mcp\n    command: [x]\n", "has both url and command"},
		{"bad name", "upstreams:\n  - name: Up Stream\n    url: http://x/mcp\n", "upstreams[0].name: \"Up Stream\" must be lowercase"},
		{"duplicate names", "upstreams:\n  - name: a\n    url: http://x/mcp\n  - name: a\n    url: http://y/mcp\n    prefix: b\n", "upstreams[1].name: \"a\" is also the name of upstreams[0]"},
		{"colliding prefixes", "upstreams:\n  - name: a\n    url: http://x/mcp\n    prefix: p\n  - name: b\n    url: http://y/mcp\n    prefix: p\n", "upstreams[1].prefix: \"p\" is also the prefix"},
		{"approval without estimate", base + "        consequential: true\n        approval: required\n", "upstreams[0].tools.t.contract.cost: an approval-gated tool needs an estimate"},
		{"expose on a tool no contract calls", base + "        expose: true\n", "t.yaml:6: upstreams[0].tools.t.expose: applies only to a tool a provider contract of this upstream calls"},
		{"two estimates", base + "        consequential: true\n        contract:\n          cost: {estimate: \"1\", estimate_tool: {tool: e, field: f}}\n", "upstreams[0].tools.t.contract.cost: set one of estimate, estimate_per_job or estimate_tool, not 2"},
		{"a price per job without a count", base + "        consequential: true\n        contract:\n          cost: {estimate_per_job: \"1\"}\n", "contract.cost.estimate_per_job: prices each remote job, so jobs_argument must name the argument that counts them"},
		{"two job counts", base + "        consequential: true\n        contract:\n          remote_jobs_field: jobs\n          cost: {jobs_argument: n, estimate_tool: {tool: e, field: f, jobs_field: n}}\n", "contract.cost.jobs_argument: counts the remote jobs, and so does estimate_tool.jobs_field; set one of them"},
		{"a fan-out without the jobs' field", base + "        consequential: true\n        contract:\n          cost: {estimate_per_job: \"1\", jobs_argument: n}\n", "contract.remote_jobs_field: is required: the cost counts the remote jobs a call starts"},
		{"a negative price per job", base + "        consequential: true\n        contract:\n          remote_jobs_field: jobs\n          cost: {estimate_per_job: \"-1\", jobs_argument: n}\n", "contract.cost.estimate_per_job: cannot be negative"},
		{"two key channels", base + "        consequential: true\n        contract:\n          key: {argument: k, header: K}\n", "contract.key: set one of argument, meta or header"},
		{"lookup without statuses", base + "        consequential: true\n        contract:\n          key: {argument: k}\n          lookup: {tool: l, status_field: s}\n", "contract.lookup.statuses: is required"},
		{"lookup naming no job", base + "        consequential: true\n        contract:\n          key: {argument: k}\n          lookup: {tool: l, status_field: s, statuses: {running: [r]}}\n", "contract.lookup.remote_job_id_field: is required (or jobs_field)"},
		{"unknown lookup answer", base + "        consequential: true\n        contract:\n          key: {argument: k}\n          lookup: {tool: l, status_field: s, statuses: {done: [ok]}}\n", "contract.lookup.statuses.done: is not one of"},
		{"unknown placeholder", base + "        consequential: true\n        contract:\n          key: {argument: k}\n          lookup: {tool: l, status_field: s, statuses: {running: [r]}, arguments: {k: \"{key}\"}}\n", "unknown placeholder \"{key}\""},
		{"lookup by a key never passed", base + "        consequential: true\n        contract:\n" + lookup, "upstreams[0].tools.t.contract.lookup.arguments.k: looks the operation up by {operation_id}, but contract.key does not pass the operation ID to the provider"},
		{"approval on a pass-through tool", base + "        approval: required\n", "approval: applies only to a consequential tool"},
		{"contract on a pass-through tool", base + "        contract:\n          cost: {estimate: \"1.00\"}\n", "t.yaml:6: upstreams[0].tools.t.contract: applies only to a consequential tool; set consequential: true, or remove it"},
		{"retry policy on a pass-through tool", base + "        consequential: false\n        retry_policy: no_automatic_resend\n", "t.yaml:7: upstreams[0].tools.t.retry_policy: applies only to a consequential tool"},
		{"origin with a path", "allowed_origins:\n  - https://ok.example\n  - https://console.example.com/app\n", `t.yaml:3: allowed_origins[1]: "https://console.example.com/app" has a path, query or fragment, which an origin never has; write https://console.example.com`},
		{"every origin", "allowed_origins: [\"*\"]\n", `t.yaml:1: allowed_origins[0]: "*" would let every web page call the gateway; list each origin`},
		{"origin without scheme", "allowed_origins: [console.example.com]\n", `allowed_origins[0]: "console.example.com" is not an http or https origin`},
		{"origin without host", "allowed_origins: [\"https://:8080\"]\n", `allowed_origins[0]: "https://:8080" names no host`},
		{"unknown approval way", base + "        consequential: true\n        approve_by: [request, email]\n", `upstreams[0].tools.t.approve_by[1]: must be request or elicitation, got "email"`},
		{"approval way twice", base + "        consequential: true\n        approve_by: [request, request]\n", "upstreams[0].tools.t.approve_by[1]: lists request twice"},
		{"approval ways on a pass-through tool", base + "        approve_by: [request]\n", "upstreams[0].tools.t.approve_by: applies only to a consequential tool"},
		{"input before task on a pass-through tool", base + "        input_before_task: 5s\n", "upstreams[0].tools.t.input_before_task: applies only to a consequential tool"},
		{"negative input before task", base + "        consequential: true\n        input_before_task: -1s\n", "upstreams[0].tools.t.input_before_task: cannot be negative"},
		{"negative approval request ttl", "approval_request_ttl: -1m\n", "approval_request_ttl: cannot be negative"},
		{"negative form cap", base + "        consequential: true\n        approval: required\n        elicitation_max_total_cost: \"-1\"\n        contract:\n          cost: {estimate: \"1.00\"}\n", "upstreams[0].tools.t.elicitation_max_total_cost: cannot be negative"},
		{"form cap without elicitation", base + "        consequential: true\n        approval: required\n        approve_by: [request]\n        elicitation_max_total_cost: \"5.00\"\n        contract:\n          cost: {estimate: \"1.00\"}\n", "upstreams[0].tools.t.elicitation_max_total_cost: caps approvals given by a form answer, but approve_by does not list elicitation"},
		{"form cap without approval", base + "        consequential: true\n        elicitation_max_total_cost: \"5.00\"\n", "upstreams[0].tools.t.elicitation_max_total_cost: caps approvals, but the tool needs none"},
		{"budgets without approval", base + "        consequential: true\n        budgets: false\n", "upstreams[0].tools.t.budgets: says whether budgets may stand in for an approval, but the tool needs none"},
		{"budgets on a pass-through tool", base + "        budgets: false\n", "upstreams[0].tools.t.budgets: applies only to a consequential tool"},
		{"budgets not a boolean", base + "        consequential: true\n        approval: required\n        budgets: sometimes\n", "budgets"},
		{"form cap on a pass-through tool", base + "        elicitation_max_total_cost: \"5.00\"\n", "upstreams[0].tools.t.elicitation_max_total_cost: applies only to a consequential tool"},
		{"form cap not an amount", base + "        consequential: true\n        elicitation_max_total_cost: lots\n", "elicitation_max_total_cost"},
		{"negative estimate", base + "        consequential: true\n        contract:\n          cost: {estimate: \"-1\"}\n", "contract.cost.estimate: cannot be negative"},
		{"unknown client cancel", base + "        consequential: true\n        client_cancel: never\n", `t.yaml:7: upstreams[0].tools.t.client_cancel: must be honour or before_send, got "never"`},
		{"client cancel on a pass-through tool", base + "        client_cancel: before_send\n", "t.yaml:6: upstreams[0].tools.t.client_cancel: applies only to a consequential tool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tt.yaml), "t.yaml", nil)
			if err == nil {
				t.Fatalf("Parse succeeded, want an error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v\nwant it to contain %q", err, tt.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("errors.Is(%v, ErrInvalid) = false", err)
			}
		})
	}
}

// A field under its deprecated name parses to the same configuration as
// under its current name, with a warning naming both; the example itself
// uses current names only.
func TestDeprecatedFieldNames(t *testing.T) {
	vars := env(map[string]string{"HOSTED_TEST_TOKEN": "x"})
	current, err := Parse(strings.NewReader(exampleText(t)), "t.yaml", vars)
	if err != nil {
		t.Fatal(err)
	}
	if len(current.Warnings) != 0 {
		t.Errorf("the example has warnings: %v", current.Warnings)
	}
	old := strings.ReplaceAll(exampleText(t), "remote_job_id_field:", "job_id_field:")
	old = strings.ReplaceAll(old, `"{remote_job_id}"`, `"{job_id}"`)
	deprecated, err := Parse(strings.NewReader(old), "t.yaml", vars)
	if err != nil {
		t.Fatalf("Parse(example with job_id_field): %v", err)
	}
	var got []string
	for _, w := range deprecated.Warnings {
		got = append(got, w.Error())
	}
	const (
		reason      = ": is deprecated and will be removed in the next release; rename it to remote_job_id_field"
		placeholder = ": the placeholder {job_id} is deprecated and will be removed in the next release; write {remote_job_id}"
	)
	want := []string{
		"t.yaml:85: upstreams[0].tools.run_suite.contract.job_id_field" + reason,
		"t.yaml:90: upstreams[0].tools.run_suite.contract.lookup.job_id_field" + reason,
		"t.yaml:110: upstreams[0].tools.run_suite.contract.charges.job_id_field" + reason,
		"t.yaml:102: upstreams[0].tools.run_suite.contract.fetch.arguments.job_id" + placeholder,
		"t.yaml:107: upstreams[0].tools.run_suite.contract.charges.arguments.job_id" + placeholder,
		"t.yaml:117: upstreams[0].tools.run_suite.contract.cancel.arguments.job_id" + placeholder,
		"t.yaml:138: upstreams[0].tools.run_matrix.contract.lookup.job_id_field" + reason,
		"t.yaml:151: upstreams[0].tools.run_matrix.contract.charges.job_id_field" + reason,
		"t.yaml:143: upstreams[0].tools.run_matrix.contract.fetch.arguments.job_id" + placeholder,
		"t.yaml:148: upstreams[0].tools.run_matrix.contract.charges.arguments.job_id" + placeholder,
		"t.yaml:158: upstreams[0].tools.run_matrix.contract.cancel.arguments.job_id" + placeholder,
	}
	// The tools are a map: warnings of different tools come in no set order.
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("warnings =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	deprecated.Warnings = nil
	if !reflect.DeepEqual(deprecated, current) {
		t.Errorf("job_id_field and {job_id} parse differently from remote_job_id_field and {remote_job_id}:\nold     %+v\ncurrent %+v", deprecated.Upstreams[0].Tools["run_suite"].Contract, current.Upstreams[0].Tools["run_suite"].Contract)
	}

	both := "upstreams:\n  - name: up\n    url: http://127.0.0.1:1/mcp\n    tools:\n      t:\n        contract:\n          job_id_field: a\n          remote_job_id_field: b\n"
	_, err = Parse(strings.NewReader(both), "t.yaml", nil)
	if want := "t.yaml:7: upstreams[0].tools.t.contract.job_id_field: is the deprecated name of remote_job_id_field, which is also given; keep only remote_job_id_field"; err == nil || err.Error() != want {
		t.Errorf("both names: error = %v, want %s", err, want)
	}
}

// Every invalid field is reported, one per line, in the same order every
// time.
func TestErrorsInFixedOrder(t *testing.T) {
	const y = "upstreams:\n  - name: up\n    url: http://127.0.0.1:1/mcp\n    tools:\n      t:\n        consequential: true\n        contract:\n          charges: {tool: c}\n"
	want := strings.Join([]string{
		"t.yaml:8: upstreams[0].tools.t.contract.charges.list_field: is required",
		"t.yaml:8: upstreams[0].tools.t.contract.charges.id_field: is required",
		"t.yaml:8: upstreams[0].tools.t.contract.charges.amount_field: is required",
		"t.yaml:8: upstreams[0].tools.t.contract.charges.status_field: is required",
	}, "\n")
	for range 20 {
		_, err := Parse(strings.NewReader(y), "t.yaml", nil)
		if err == nil || err.Error() != want {
			t.Fatalf("error =\n%v\nwant\n%s", err, want)
		}
	}
}

func TestEnvExpansion(t *testing.T) {
	const y = "listen: ${HOST}:8931\n\nupstreams:\n  - name: up\n    url: http://127.0.0.1:1/mcp\n    headers: {Authorization: \"Bearer ${TOKEN}\", X-Extra: \"${EMPTY}\"}\n"
	c, err := Parse(strings.NewReader(y), "t.yaml", env(map[string]string{"HOST": "127.0.0.2", "TOKEN": "s3cret", "EMPTY": ""}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.2:8931" || c.Upstreams[0].Headers["Authorization"] != "Bearer s3cret" || c.Upstreams[0].Headers["X-Extra"] != "" {
		t.Errorf("expanded: listen %q, headers %v", c.Listen, c.Upstreams[0].Headers)
	}

	_, err = Parse(strings.NewReader(y), "t.yaml", env(map[string]string{"HOST": "127.0.0.2"}))
	want := "t.yaml:6: ${TOKEN} is not set in the environment; set it (it may be empty) or remove the reference\n" +
		"t.yaml:6: ${EMPTY} is not set in the environment; set it (it may be empty) or remove the reference"
	if err == nil || err.Error() != want || !errors.Is(err, ErrInvalid) {
		t.Errorf("with TOKEN and EMPTY unset: error =\n%v\nwant\n%s", err, want)
	}

	raw, err := Parse(strings.NewReader(strings.Replace(y, "${HOST}", "127.0.0.1", 1)), "t.yaml", nil)
	if err != nil {
		t.Fatalf("without expansion: %v", err)
	}
	if got := raw.Upstreams[0].Headers["Authorization"]; got != "Bearer ${TOKEN}" {
		t.Errorf("without expansion: header %q, want the reference as written", got)
	}
}

func TestLoadExpandsFromTheEnvironment(t *testing.T) {
	t.Setenv("TASKGATE_CONFIG_TEST_TOKEN", "from-env")
	path := t.TempDir() + "/taskgate.yaml"
	if err := os.WriteFile(path, []byte("upstreams:\n  - name: up\n    url: http://127.0.0.1:1/mcp\n    headers: {Authorization: \"Bearer ${TASKGATE_CONFIG_TEST_TOKEN}\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Upstreams[0].Headers["Authorization"]; got != "Bearer from-env" {
		t.Errorf("header = %q, want %q", got, "Bearer from-env")
	}
}

func TestAllowedOrigins(t *testing.T) {
	c, err := Parse(strings.NewReader("allowed_origins: [https://console.example.com, 'http://127.0.0.1:3000/']\n"), "t.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"https://console.example.com", "http://127.0.0.1:3000/"}; !slices.Equal(c.AllowedOrigins, want) {
		t.Errorf("allowed_origins = %q, want %q", c.AllowedOrigins, want)
	}
}

// The conformance harness substitutes the two placeholders of
// conformance/tasks.yaml; the template must stay valid, and configure as
// consequential exactly the tools the Tasks scenarios expect as tasks.
func TestConformanceTemplateParses(t *testing.T) {
	const path = "../conformance/tasks.yaml"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(strings.NewReader(string(b)), path, env(map[string]string{
		"UPSTREAM_URL": "http://127.0.0.1:8960/mcp", "LEDGER": "/tmp/conformance.db",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Upstreams) != 1 || c.Upstreams[0].ToolPrefix() != "" {
		t.Fatalf("want one upstream with prefix \"\", got %+v", c.Upstreams)
	}
	var consequential, taskOnly []string
	for name, tool := range c.Upstreams[0].Tools {
		if tool.Consequential {
			consequential = append(consequential, name)
			if tool.Contract.Lookup == nil || tool.Contract.Key.Argument == "" {
				t.Errorf("%s has no key and lookup in its contract", name)
			}
		}
		if tool.RequireTask {
			taskOnly = append(taskOnly, name)
		}
	}
	slices.Sort(consequential)
	slices.Sort(taskOnly)
	if want := []string{"confirm_delete", "failing_job", "multi_input", "protocol_error_job", "slow_compute", "test_tool_with_task"}; !slices.Equal(consequential, want) {
		t.Errorf("consequential tools = %v, want %v", consequential, want)
	}
	if want := []string{"failing_job", "test_tool_with_task"}; !slices.Equal(taskOnly, want) {
		t.Errorf("task-only tools = %v, want %v", taskOnly, want)
	}
}

// TestClientCancelDefault: a consequential tool honours a client's cancel
// unless its policy says before_send.
func TestClientCancelDefault(t *testing.T) {
	const yaml = "upstreams:\n  - name: up\n    url: http://127.0.0.1:1/mcp\n    tools:\n      a: {consequential: true}\n      b: {consequential: true, client_cancel: before_send}\n"
	c, err := Parse(strings.NewReader(yaml), "t.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	tools := c.Upstreams[0].Tools
	if tools["a"].ClientCancel != ledger.ClientCancelHonour || tools["b"].ClientCancel != ledger.ClientCancelBeforeSend {
		t.Errorf("client_cancel = %q, %q; want honour by default, before_send where set", tools["a"].ClientCancel, tools["b"].ClientCancel)
	}
}
