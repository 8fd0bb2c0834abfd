package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/config"
)

// TestMain lets this test binary serve as an echo upstream when it runs
// itself as one, as the benchmark's binary does
// (TestRunMeasuresEverything).
func TestMain(m *testing.M) {
	if kind := os.Getenv(echoEnv); kind != "" {
		os.Exit(serveEcho(kind))
	}
	os.Exit(m.Run())
}

func TestParseClients(t *testing.T) {
	tests := []struct {
		in      string
		want    []clientKind
		wantErr bool
	}{
		{in: "2026-07-28", want: []clientKind{clientDefault}},
		{in: "2025-11-25, 2026-07-28", want: []clientKind{clientLegacy, clientDefault}},
		{in: "2026-07-28,2026-07-28", want: []clientKind{clientDefault}},
		{in: "", want: nil},
		{in: "2024-11-05", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseClients(tt.in)
		if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
			t.Errorf("parseClients(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseUpstreams(t *testing.T) {
	tests := []struct {
		in      string
		want    []upstreamKind
		wantErr bool
	}{
		{in: "sessions,stateless,stdio", want: []upstreamKind{upstreamSessions, upstreamStateless, upstreamStdio}},
		{in: "stdio, sessions, stdio", want: []upstreamKind{upstreamStdio, upstreamSessions}},
		{in: ",", want: nil},
		{in: "sse", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseUpstreams(tt.in)
		if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
			t.Errorf("parseUpstreams(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseElicitation(t *testing.T) {
	tests := []struct {
		in      string
		want    []bool
		wantErr bool
	}{
		{in: "both", want: []bool{false, true}},
		{in: "yes", want: []bool{true}},
		{in: "no", want: []bool{false}},
		{in: "true", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseElicitation(tt.in)
		if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
			t.Errorf("parseElicitation(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestPairingsCoverEveryCombination(t *testing.T) {
	got := pairings([]clientKind{clientDefault, clientLegacy}, []upstreamKind{upstreamSessions, upstreamStateless, upstreamStdio}, []bool{false, true})
	if len(got) != 12 {
		t.Fatalf("%d pairings, want 12: %v", len(got), got)
	}
	seen := map[pairing]bool{}
	for _, p := range got {
		seen[p] = true
	}
	if len(seen) != 12 {
		t.Errorf("%d distinct pairings among %v, want 12", len(seen), got)
	}
	if first, want := got[0], (pairing{client: clientDefault, elicitation: false, upstream: upstreamSessions}); first != want {
		t.Errorf("first pairing %v, want %v: clients outermost, elicitation innermost", first, want)
	}
	if second, want := got[1], (pairing{client: clientDefault, elicitation: true, upstream: upstreamSessions}); second != want {
		t.Errorf("second pairing %v, want %v", second, want)
	}
}

func TestExpectedVersion(t *testing.T) {
	tests := []struct {
		client   clientKind
		upstream upstreamKind
		path     string
		want     string
	}{
		// A stateful go-sdk handler never negotiates 2026-07-28.
		{clientDefault, upstreamSessions, pathDirect, versionLegacy},
		{clientDefault, upstreamSessions, pathTaskgate, versionExtension},
		{clientDefault, upstreamStateless, pathDirect, versionExtension},
		{clientDefault, upstreamStateless, pathTaskgate, versionExtension},
		{clientDefault, upstreamStdio, pathDirect, versionExtension},
		{clientDefault, upstreamStdio, pathTaskgate, versionExtension},
		{clientLegacy, upstreamSessions, pathDirect, versionLegacy},
		{clientLegacy, upstreamStateless, pathTaskgate, versionLegacy},
		{clientLegacy, upstreamStdio, pathDirect, versionLegacy},
		// The peer's sessions are checked against each other instead.
		{clientDefault, upstreamSessions, pathPeer, ""},
		{clientLegacy, upstreamStdio, pathPeer, ""},
	}
	for _, tt := range tests {
		for _, elicitation := range []bool{false, true} {
			p := pairing{client: tt.client, elicitation: elicitation, upstream: tt.upstream}
			if got := expectedVersion(p, tt.path); got != tt.want {
				t.Errorf("expectedVersion(%v, %s) = %s, want %s", p, tt.path, got, tt.want)
			}
		}
	}
}

func TestComparePairing(t *testing.T) {
	p := pairing{client: clientDefault, upstream: upstreamStateless}
	tests := []struct {
		name      string
		direct    measurement
		gate      measurement
		wantRatio float64
		wantAdded float64
		wantMet   bool
	}{
		{name: "1 session at the bound", direct: measurement{Sessions: 1, P50Ms: 1.0, CallsPerSec: 1000}, gate: measurement{Sessions: 1, P50Ms: 1.25, CallsPerSec: 100},
			wantRatio: 0.1, wantAdded: 0.25, wantMet: true},
		{name: "1 session above it", direct: measurement{Sessions: 1, P50Ms: 1.0, CallsPerSec: 1000}, gate: measurement{Sessions: 1, P50Ms: 1.5, CallsPerSec: 1000},
			wantRatio: 1, wantAdded: 0.5, wantMet: false},
		{name: "8 sessions at the bound", direct: measurement{Sessions: 8, P50Ms: 1, CallsPerSec: 1000}, gate: measurement{Sessions: 8, P50Ms: 9, CallsPerSec: 750},
			wantRatio: 0.75, wantAdded: 8, wantMet: true},
		{name: "8 sessions below it", direct: measurement{Sessions: 8, P50Ms: 1, CallsPerSec: 1000}, gate: measurement{Sessions: 8, P50Ms: 1, CallsPerSec: 740},
			wantRatio: 0.74, wantAdded: 0, wantMet: false},
		{name: "no direct calls", direct: measurement{Sessions: 8}, gate: measurement{Sessions: 8, CallsPerSec: 740},
			wantRatio: 0, wantMet: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := comparePairing(p, tt.direct, tt.gate)
			if !near(got.Ratio, tt.wantRatio) || !near(got.AddedP50Ms, tt.wantAdded) || got.Met != tt.wantMet {
				t.Errorf("ratio %v, added p50 %v, met %v; want %v, %v, %v", got.Ratio, got.AddedP50Ms, got.Met, tt.wantRatio, tt.wantAdded, tt.wantMet)
			}
			if got.Sessions != tt.direct.Sessions || got.Client != "2026-07-28" || got.Upstream != "stateless" || got.Target == "" {
				t.Errorf("row %+v does not name its pairing, session count and target", got)
			}
		})
	}
}

func TestPeerRow(t *testing.T) {
	p := pairing{client: clientDefault, upstream: upstreamStateless}
	tests := []struct {
		name      string
		direct    measurement
		gate      measurement
		peer      measurement
		wantRatio float64
		wantAdded float64
		want      bool
	}{
		{name: "1 session, faster and closer than the peer",
			direct: measurement{Sessions: 1, P50Ms: 1, CallsPerSec: 1000}, gate: measurement{Sessions: 1, P50Ms: 1.2, CallsPerSec: 800},
			peer: measurement{Sessions: 1, P50Ms: 1.3, CallsPerSec: 700}, wantRatio: 0.7, wantAdded: 0.3, want: true},
		{name: "1 session, the same rate but more added latency",
			direct: measurement{Sessions: 1, P50Ms: 1, CallsPerSec: 1000}, gate: measurement{Sessions: 1, P50Ms: 1.3, CallsPerSec: 700},
			peer: measurement{Sessions: 1, P50Ms: 1.2, CallsPerSec: 700}, wantRatio: 0.7, wantAdded: 0.2, want: false},
		{name: "8 sessions, equal ratios",
			direct: measurement{Sessions: 8, P50Ms: 1, CallsPerSec: 1000}, gate: measurement{Sessions: 8, P50Ms: 9, CallsPerSec: 750},
			peer: measurement{Sessions: 8, P50Ms: 2, CallsPerSec: 750}, wantRatio: 0.75, wantAdded: 1, want: true},
		{name: "8 sessions, below the peer",
			direct: measurement{Sessions: 8, P50Ms: 1, CallsPerSec: 1000}, gate: measurement{Sessions: 8, P50Ms: 1, CallsPerSec: 740},
			peer: measurement{Sessions: 8, P50Ms: 1, CallsPerSec: 950}, wantRatio: 0.95, wantAdded: 0, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := comparePairing(p, tt.direct, tt.gate)
			r.peer(tt.peer)
			if r.Peer == nil || r.AtLeastPeer == nil {
				t.Fatalf("the row has no peer figures: %+v", r)
			}
			if !near(r.PeerRatio, tt.wantRatio) || !near(r.PeerAddedP50Ms, tt.wantAdded) || *r.AtLeastPeer != tt.want {
				t.Errorf("peer ratio %v, added p50 %v, taskgate >= peer %v; want %v, %v, %v", r.PeerRatio, r.PeerAddedP50Ms, *r.AtLeastPeer, tt.wantRatio, tt.wantAdded, tt.want)
			}
		})
	}
}

func TestPeerConfig(t *testing.T) {
	ups := []gatewayUpstream{
		{name: "sessions", url: "http://127.0.0.1:1/mcp"},
		{name: "stdio", command: []string{"/bin/echo-server", "-x"}, env: map[string]string{echoEnv: "stdio"}},
	}
	raw, err := peerConfig("127.0.0.1:2", ups)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		McpProxy struct {
			BaseURL, Addr, Type string
		}
		McpServers map[string]struct {
			URL, TransportType, Command string
			Args                        []string
			Env                         map[string]string
		}
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("the configuration is not JSON: %v\n%s", err, raw)
	}
	if got.McpProxy.Addr != "127.0.0.1:2" || got.McpProxy.BaseURL != "http://127.0.0.1:2" || got.McpProxy.Type != "streamable-http" {
		t.Errorf("mcpProxy = %+v, want it listening on 127.0.0.1:2 over Streamable HTTP", got.McpProxy)
	}
	if s := got.McpServers["sessions"]; s.URL != "http://127.0.0.1:1/mcp" || s.TransportType != "streamable-http" || s.Command != "" {
		t.Errorf("the HTTP upstream = %+v, want its URL over Streamable HTTP", s)
	}
	if s := got.McpServers["stdio"]; s.Command != "/bin/echo-server" || !slices.Equal(s.Args, []string{"-x"}) || s.Env[echoEnv] != "stdio" || s.URL != "" {
		t.Errorf("the stdio upstream = %+v, want its command, arguments and environment", s)
	}
	if len(got.McpServers) != 2 {
		t.Errorf("servers = %v, want sessions and stdio", got.McpServers)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func TestPrintTableShowsEveryRow(t *testing.T) {
	p := pairing{client: clientLegacy, elicitation: true, upstream: upstreamStdio}
	alloc, cpu := 12.5, 0.25
	rep := &results{Machine: machine{Sessions: 8, Rounds: 1, Gateway: "/bin/taskgate",
		UpstreamPeakRSSBytes: map[string]int64{"stateless": 3 << 20, "sessions": 1 << 20}}, Pairings: []pairingRow{
		comparePairing(p, measurement{Path: pathDirect, Era: versionLegacy, Sessions: 1, P50Ms: 1, CallsPerSec: 1000},
			measurement{Path: pathTaskgate, Era: versionLegacy, Sessions: 1, P50Ms: 1.2, CallsPerSec: 900, GatewayAllocKBPerCall: &alloc, GatewayCPUMsPerCall: &cpu}),
		comparePairing(p, measurement{Path: pathDirect, Era: versionLegacy, Sessions: 8, CallsPerSec: 1000},
			measurement{Path: pathTaskgate, Era: versionLegacy, Sessions: 8, CallsPerSec: 500, GatewayAllocKBPerCall: &alloc, GatewayCPUMsPerCall: &cpu}),
	}}
	var out bytes.Buffer
	printTable(&out, rep)
	text := out.String()
	for _, want := range []string{
		"met (added p50 <= 0.30 ms)", "below (ratio >= 0.75x)", "12.5", "0.250", "2025-11-25 / 2025-11-25",
		"targets met: 1 of 2", "peak RSS (VmHWM) over the whole run: n/a", "/bin/taskgate",
		"echo upstream peak RSS (VmHWM) over the whole run: sessions 1.0 MB, stateless 3.0 MB;",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the table lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "accept:") {
		t.Errorf("the table has an acceptance section without acceptances:\n%s", text)
	}
}

func TestPrintTableShowsThePeer(t *testing.T) {
	p := pairing{client: clientDefault, upstream: upstreamStateless}
	cpu := 0.125
	r := comparePairing(p, measurement{Path: pathDirect, Era: versionExtension, Sessions: 8, CallsPerSec: 1000},
		measurement{Path: pathTaskgate, Era: versionExtension, Sessions: 8, CallsPerSec: 800})
	r.peer(measurement{Path: pathPeer, Era: "2025-06-18", Sessions: 8, CallsPerSec: 900, GatewayCPUMsPerCall: &cpu})
	var out bytes.Buffer
	printTable(&out, &results{Machine: machine{Sessions: 8, Rounds: 1, Peer: "/opt/mcp-proxy"}, Pairings: []pairingRow{r}})
	text := out.String()
	for _, want := range []string{"taskgate >= peer", "2025-06-18", "0.90x", "0.125", "peer: /opt/mcp-proxy", "in 0 of 1 rows"} {
		if !strings.Contains(text, want) {
			t.Errorf("the table lacks %q:\n%s", want, text)
		}
	}
}

func TestMetricValue(t *testing.T) {
	const text = `# HELP go_memstats_alloc_bytes_total Total number of bytes allocated in heap until now, even if released already.
# TYPE go_memstats_alloc_bytes_total counter
go_memstats_alloc_bytes_total 1.234567e+07
go_memstats_alloc_bytes_total_extra 9
go_memstats_alloc_bytes 42
process_cpu_seconds_total{mode="x"} 7
process_cpu_seconds_total 3.5 1700000000000
bad_value NaNish
`
	tests := []struct {
		name    string
		want    float64
		wantErr string
	}{
		{name: "go_memstats_alloc_bytes_total", want: 1.234567e+07},
		{name: "go_memstats_alloc_bytes", want: 42},
		{name: "process_cpu_seconds_total", want: 3.5},
		{name: "go_gc_duration_seconds", wantErr: "no sample go_gc_duration_seconds"},
		{name: "bad_value", wantErr: `value "NaNish", not a number`},
	}
	for _, tt := range tests {
		got, err := metricValue(text, tt.name)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("metricValue(%s) = %v, %v; want an error with %q", tt.name, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("metricValue(%s) = %v, %v; want %v", tt.name, got, err, tt.want)
		}
	}
}

// TestGatewayConfigParses holds the gateway's configuration to taskgate's
// own parser: every upstream by its kind, with its name as its tools'
// prefix.
func TestGatewayConfigParses(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway.yaml")
	y := gatewayConfig("127.0.0.1:9999", "sqlite:"+filepath.Join(dir, "a dir", "gateway.db"), []gatewayUpstream{
		{name: "sessions", url: "http://127.0.0.1:1234/mcp"},
		{name: "stdio", command: []string{"/path with space/proxybench"}, env: map[string]string{echoEnv: string(upstreamStdio)}},
	})
	cfg, err := config.Parse(strings.NewReader(y), path, nil)
	if err != nil {
		t.Fatalf("config.Parse:\n%s\n%v", y, err)
	}
	if cfg.Listen != "127.0.0.1:9999" || len(cfg.Upstreams) != 2 {
		t.Fatalf("listen %q, %d upstreams; want 127.0.0.1:9999 and 2:\n%s", cfg.Listen, len(cfg.Upstreams), y)
	}
	web, stdio := cfg.Upstreams[0], cfg.Upstreams[1]
	if web.URL != "http://127.0.0.1:1234/mcp" || web.ToolPrefix() != "sessions" || len(web.Command) != 0 {
		t.Errorf("sessions upstream = url %q, prefix %q, command %v", web.URL, web.ToolPrefix(), web.Command)
	}
	if !slices.Equal(stdio.Command, []string{"/path with space/proxybench"}) || stdio.Env[echoEnv] != string(upstreamStdio) || stdio.ToolPrefix() != "stdio" || stdio.URL != "" {
		t.Errorf("stdio upstream = command %v, env %v, prefix %q, url %q", stdio.Command, stdio.Env, stdio.ToolPrefix(), stdio.URL)
	}
	if len(web.Tools) != 0 || len(stdio.Tools) != 0 {
		t.Errorf("tools listed (%v, %v); want none, so that echo passes straight through", web.Tools, stdio.Tools)
	}
}

func TestMedianKeepsEveryRound(t *testing.T) {
	got := median([]measurement{{CallsPerSec: 300, P50Ms: 3}, {CallsPerSec: 100, P50Ms: 1}, {CallsPerSec: 200, P50Ms: 2}})
	if got.CallsPerSec != 200 || got.P50Ms != 2 {
		t.Errorf("median picked %v calls/s with p50 %v, want the 200 calls/s round with p50 2", got.CallsPerSec, got.P50Ms)
	}
	if want := []float64{300, 100, 200}; !slices.Equal(got.Rounds, want) {
		t.Errorf("median rounds = %v, want %v in run order", got.Rounds, want)
	}
	if one := median([]measurement{{CallsPerSec: 5}}); one.Rounds != nil {
		t.Errorf("a single round lists rounds %v, want none", one.Rounds)
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{args: []string{"-duration", "0s"}, want: "-duration must be positive"},
		{args: []string{"-sessions", "1"}, want: "-sessions must be at least 2"},
		{args: []string{"-clients", "1999-01-01"}, want: "unknown client"},
		{args: []string{"-clients", ","}, want: "-clients names no client"},
		{args: []string{"-upstreams", "sse"}, want: "unknown upstream"},
		{args: []string{"-upstreams", ""}, want: "-upstreams names no upstream"},
		{args: []string{"-elicitation", "maybe"}, want: "not one of both, yes or no"},
		{args: []string{"-taskgate", "/nonexistent/taskgate"}, want: "-taskgate /nonexistent/taskgate is not a binary"},
		{args: []string{"-pass=false", "-accept=false"}, want: "leave nothing to measure"},
		{args: []string{"-peer", "/nonexistent/mcp-proxy"}, want: "-peer /nonexistent/mcp-proxy is not a binary"},
		{args: []string{"-peer", "/bin/sh", "-pass=false"}, want: "-peer measures pass-through calls"},
		{args: []string{"-dir", "/nonexistent/proxybench"}, want: "-dir /nonexistent/proxybench"},
		{args: []string{"extra"}, want: "unexpected arguments"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tt.args, &stdout, &stderr, "100")
		if code != 2 || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("run(%q) = %d with stderr %q, want 2 with %q", tt.args, code, stderr.String(), tt.want)
		}
		if stdout.Len() != 0 {
			t.Errorf("run(%q) printed %q to stdout, want nothing", tt.args, stdout.String())
		}
	}
}

// TestRunFailsWhenTheGatewayDoes gives the benchmark a "taskgate" that
// fails at once: the run ends with exit 1 and says what failed.
func TestRunFailsWhenTheGatewayDoes(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "taskgate")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho 'no ledger here' >&2\nexit 3\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	args := []string{"-taskgate", bin, "-accept=false", "-dir", t.TempDir()}
	if code := run(t.Context(), args, &stdout, &stderr, "100"); code != 1 || !strings.Contains(stderr.String(), "keys create") || !strings.Contains(stderr.String(), "no ledger here") {
		t.Errorf("run = %d with stderr %q; want 1, naming keys create and the gateway's own words", code, stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("a failed run printed %q to stdout, want nothing", stdout.String())
	}
	// The HTTP echo upstreams were started before the gateway failed.
	if left := children(t); len(left) > 0 {
		t.Errorf("processes left running after the failed run: %v", left)
	}
}

// children lists the processes this test process started that still
// exist, from /proc; none where there is no /proc.
func children(t *testing.T) []string {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // it ended meanwhile
		}
		// The command name, in parentheses, may hold spaces; the parent's
		// PID is the second field after it.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		if f := strings.Fields(s[i+1:]); len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) {
			out = append(out, s[:i+1])
		}
	}
	return out
}

// TestRunMeasuresEverything runs the benchmark briefly on two pairings
// (an HTTP upstream with sessions and a stdio one, for a client that
// declares elicitation) against a real gateway process, and the acceptance
// path against the in-process daemon, and checks the shape of what it
// reports, not its numbers.
func TestRunMeasuresEverything(t *testing.T) {
	if testing.Short() {
		t.Skip("builds taskgate and starts gateways; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	// A window long enough that a loaded machine under the race detector
	// still completes an acceptance with the worker dispatching in it.
	args := []string{"-duration", "1s", "-warmup", "50ms", "-sessions", "2", "-json", "-dir", t.TempDir(),
		"-clients", "2026-07-28", "-upstreams", "sessions,stdio", "-elicitation", "yes"}
	if code := run(ctx, args, &stdout, &stderr, "100"); code != 0 {
		t.Fatalf("run = %d, want 0; stderr:\n%s", code, stderr.String())
	}
	var rep results
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("the -json output does not decode: %v\n%s", err, stdout.String())
	}
	checkWindow := func(what string, m measurement) {
		t.Helper()
		if m.Calls <= 0 || m.CallsPerSec <= 0 || m.P50Ms <= 0 || m.P99Ms < m.P50Ms {
			t.Errorf("%s: calls %d, %v calls/s, p50 %v, p99 %v; want calls, a rate and ordered percentiles", what, m.Calls, m.CallsPerSec, m.P50Ms, m.P99Ms)
		}
	}

	type key struct {
		client, upstream string
		elicitation      bool
		sessions         int
	}
	var got []key
	for _, r := range rep.Pairings {
		k := key{r.Client, r.Upstream, r.Elicitation, r.Sessions}
		got = append(got, k)
		p := pairing{client: clientKind(r.Client), elicitation: r.Elicitation, upstream: upstreamKind(r.Upstream)}
		for _, m := range []measurement{r.Direct, r.Taskgate} {
			checkWindow(p.String()+" "+m.Path, m)
			if want := expectedVersion(p, m.Path); m.Era != want || m.Sessions != r.Sessions {
				t.Errorf("%v %s: negotiated %s with %d sessions, want %s with %d", p, m.Path, m.Era, m.Sessions, want, r.Sessions)
			}
		}
		if r.Direct.Path != pathDirect || r.Taskgate.Path != pathTaskgate {
			t.Errorf("%v: paths %s and %s, want direct and taskgate", p, r.Direct.Path, r.Taskgate.Path)
		}
		if r.Direct.GatewayAllocKBPerCall != nil || r.Taskgate.GatewayAllocKBPerCall == nil || *r.Taskgate.GatewayAllocKBPerCall <= 0 ||
			r.Taskgate.GatewayCPUMsPerCall == nil || *r.Taskgate.GatewayCPUMsPerCall < 0 {
			t.Errorf("%v: gateway alloc %v / %v KB and cpu %v ms per call; want a positive allocation and CPU through taskgate only",
				p, deref(r.Direct.GatewayAllocKBPerCall), deref(r.Taskgate.GatewayAllocKBPerCall), deref(r.Taskgate.GatewayCPUMsPerCall))
		}
		if r.Target == "" {
			t.Errorf("%v, %d sessions: no target", p, r.Sessions)
		}
	}
	want := []key{{"2026-07-28", "sessions", true, 1}, {"2026-07-28", "sessions", true, 2}, {"2026-07-28", "stdio", true, 1}, {"2026-07-28", "stdio", true, 2}}
	if !slices.Equal(got, want) {
		t.Errorf("pairing rows = %v, want %v", got, want)
	}
	if runtime.GOOS == "linux" {
		if rep.Machine.GatewayPeakRSSBytes == nil || *rep.Machine.GatewayPeakRSSBytes <= 0 {
			t.Errorf("gateway peak RSS = %v, want a size on Linux", deref(rep.Machine.GatewayPeakRSSBytes))
		}
		// The stdio upstream's processes are not measured.
		if rss := rep.Machine.UpstreamPeakRSSBytes; len(rss) != 1 || rss["sessions"] <= 0 {
			t.Errorf("upstream peak RSS = %v, want a size for sessions only on Linux", rss)
		}
	}
	if left := children(t); len(left) > 0 {
		t.Errorf("processes left running after the run: %v", left)
	}

	type acceptKey struct {
		worker   string
		sessions int
	}
	var accepts []acceptKey
	for _, m := range rep.Measurements {
		accepts = append(accepts, acceptKey{m.Worker, m.Sessions})
		checkWindow("accept (worker "+m.Worker+")", m)
		if m.Path != "accept" || m.Era != versionExtension || m.Undispatched == nil || m.Created < m.Calls || int64(*m.Undispatched) > m.Created {
			t.Errorf("%s %s (worker %s) %d sessions: created %d, undispatched %v for %d calls; want accept on 2026-07-28, created >= calls >= 0 undispatched",
				m.Path, m.Era, m.Worker, m.Sessions, m.Created, deref(m.Undispatched), m.Calls)
		}
	}
	if want := []acceptKey{{"on", 1}, {"on", 2}, {"stopped", 1}, {"stopped", 2}}; !slices.Equal(accepts, want) {
		t.Errorf("acceptance measurements = %v, want %v", accepts, want)
	}
	if rep.Machine.GOMAXPROCS < 1 || rep.Machine.GoVersion == "" || rep.Machine.Synchronous != "full" || rep.Machine.Gateway == "" {
		t.Errorf("machine facts = %+v, want GOMAXPROCS, the Go version, synchronous full and the gateway binary", rep.Machine)
	}
}

// deref shows what p points to, or nil, in a message.
func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
