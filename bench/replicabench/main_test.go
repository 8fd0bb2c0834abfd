package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskgate/taskgate/daemon"
	"github.com/taskgate/taskgate/internal/pgtest"
)

// TestMain lets this test binary serve as the echo server when it runs
// itself as one, as the benchmark's binary does (TestRunChildProcesses).
func TestMain(m *testing.M) {
	if os.Getenv(echoEnv) != "" {
		daemon.TuneGC(os.Getenv)
		os.Exit(serveEcho())
	}
	os.Exit(m.Run())
}

func TestParseReplicas(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{in: "1,2,4", want: []int{1, 2, 4}},
		{in: " 1, 4 ,4,", want: []int{1, 4}},
		{in: "", want: nil},
		{in: "1,two", wantErr: true},
		{in: "0", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseReplicas(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("parseReplicas(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("parseReplicas(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestRatios(t *testing.T) {
	ms := []measurement{
		{Name: stepRaw, Clients: 64, PerSecond: 1000},
		{Name: stepCeiling, Clients: 64, PerSecond: 2000},
		{Name: stepPass, Replicas: 1, Clients: 64, PerSecond: 1000},
		{Name: stepAccept, Replicas: 1, Clients: 64, PerSecond: 500},
		{Name: stepAccept, Replicas: 2, Clients: 64, PerSecond: 400},
		{Name: stepAccept, Replicas: 4, Clients: 64, PerSecond: 750},
	}
	got := ratios(ms)
	type row struct {
		name  string
		value float64
		met   any
	}
	want := []row{
		{"accept 1 replica(s) / raw, 64 clients", 0.5, true},
		{"accept 1 replica(s) / MCP ceiling, 64 clients", 0.25, nil},
		{"accept 2 replica(s) / raw, 64 clients", 0.4, false},
		{"accept 2 replica(s) / MCP ceiling, 64 clients", 0.2, nil},
		{"accept 4 replica(s) / raw, 64 clients", 0.75, true},
		{"accept 4 replica(s) / MCP ceiling, 64 clients", 0.375, nil},
		{"pass-through 1 replica(s) / MCP ceiling, 64 clients", 0.5, nil},
		{"scaling: accept 2 replicas / 1 replica", 0.8, nil},
		{"scaling: accept 4 replicas / 1 replica", 1.5, nil},
	}
	if len(got) != len(want) {
		t.Fatalf("ratios = %+v, want %d of them", got, len(want))
	}
	for i, w := range want {
		g := got[i]
		var met any
		if g.Met != nil {
			met = *g.Met
		}
		if d := g.Value - w.value; g.Name != w.name || d > 1e-9 || d < -1e-9 || met != w.met {
			t.Errorf("ratio %d = %q %v (met %v), want %q %v (met %v)", i, g.Name, g.Value, met, w.name, w.value, w.met)
		}
	}
	// Without the pass-through there is no ratio of it.
	for _, r := range ratios(slices.Delete(slices.Clone(ms), 2, 3)) {
		if strings.HasPrefix(r.Name, "pass-through") {
			t.Errorf("ratio %q without a pass-through measurement", r.Name)
		}
	}
}

func TestCPUShareOtherIsTheRest(t *testing.T) {
	c := cpuShare{Gateways: 0.5, Upstream: 0.25, Postgres: 0.25, Bench: 0.5, Machine: 1.75}
	if got := c.Other(); got != 0.25 {
		t.Errorf("Other = %v, want 0.25", got)
	}
	// Counters read at slightly different instants may overshoot.
	if got := (cpuShare{Gateways: 1, Machine: 0.9}).Other(); got != 0 {
		t.Errorf("Other = %v, want 0 rather than negative", got)
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{args: []string{"-duration", "0s"}, want: "-duration must be positive"},
		{args: []string{"-warmup", "-1s"}, want: "-warmup may not be negative"},
		{args: []string{"-rounds", "0"}, want: "-rounds must be at least 1"},
		{args: []string{"-clients", "0"}, want: "-clients must be at least 1"},
		{args: []string{"-replicas", ","}, want: "names no replica count"},
		{args: []string{"-replicas", "2,4"}, want: "must start with 1"},
		{args: []string{"-replicas", "1,x"}, want: `"x" is not a replica count`},
		{args: []string{"-clients", "2", "-replicas", "1,4"}, want: "-replicas 4 exceeds -clients 2"},
		{args: []string{"-postgres", "sqlite:x.db"}, want: "-postgres must be a postgres:// URL"},
		{args: []string{"-taskgate", "/nonexistent/taskgate"}, want: "-taskgate /nonexistent/taskgate is not a binary"},
		{args: []string{"extra"}, want: "unexpected arguments"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tt.args, &stdout, &stderr, "400")
		if code != 2 || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("run(%q) = %d with stderr %q, want 2 with %q", tt.args, code, stderr.String(), tt.want)
		}
		if stdout.Len() != 0 {
			t.Errorf("run(%q) printed %q to stdout, want nothing", tt.args, stdout.String())
		}
	}
}

// TestRunMeasuresEverything runs the whole benchmark briefly, with the
// gateways in this process (no binary to build), on the test server, and
// checks the shape of what it reports, not its numbers, and that the run's
// schema is gone afterwards.
func TestRunMeasuresEverything(t *testing.T) {
	if testing.Short() {
		t.Skip("starts several gateways; skipped with -short")
	}
	base := pgtest.BaseURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	args := []string{"-postgres", base, "-inprocess", "-duration", "250ms", "-warmup", "50ms", "-clients", "4", "-replicas", "1,2", "-json"}
	if code := run(ctx, args, &stdout, &stderr, "400"); code != 0 {
		t.Fatalf("run = %d, want 0; stderr:\n%s", code, stderr.String())
	}
	var rep results
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("the -json output does not decode: %v\n%s", err, stdout.String())
	}
	type key struct {
		name     string
		replicas int
	}
	var got []key
	for _, m := range rep.Measurements {
		got = append(got, key{m.Name, m.Replicas})
		if m.Clients != 4 || m.Calls <= 0 || m.PerSecond <= 0 || m.P50Ms <= 0 || m.P99Ms < m.P50Ms {
			t.Errorf("%s: %d clients, %d calls, %v/s, p50 %v, p99 %v; want 4 clients, calls, a rate and ordered percentiles",
				m.label(), m.Clients, m.Calls, m.PerSecond, m.P50Ms, m.P99Ms)
		}
	}
	if want := []key{{"raw insert", 0}, {"MCP ceiling", 0}, {"pass-through", 1}, {"accept", 1}, {"accept", 2}}; !slices.Equal(got, want) {
		t.Errorf("measurements = %v, want %v", got, want)
	}
	targets := 0
	for _, r := range rep.Ratios {
		if r.Met != nil {
			targets++
		}
	}
	if len(rep.Ratios) != 6 || targets != 2 {
		t.Errorf("%d ratios, %d with a target; want 6 (accept/raw, accept/ceiling, pass-through/ceiling, scaling), two of them (accept/raw) with one", len(rep.Ratios), targets)
	}
	if rep.Machine.Schema == "" || !strings.HasPrefix(rep.Machine.Postgres, "PostgreSQL") {
		t.Errorf("machine = %+v, want the schema and the server's version", rep.Machine)
	}
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var left bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", rep.Machine.Schema).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left {
		t.Errorf("schema %s is still there after the run", rep.Machine.Schema)
	}
}

// TestRunChildProcesses runs the benchmark once with real child processes,
// as ./bench/replicas does, when a taskgate binary is named by
// TASKGATE_BENCH_BINARY (building one here would take longer than the
// test).
func TestRunChildProcesses(t *testing.T) {
	bin := os.Getenv("TASKGATE_BENCH_BINARY")
	if bin == "" || testing.Short() {
		t.Skip("set TASKGATE_BENCH_BINARY to a taskgate binary to run the replicas as child processes")
	}
	base := pgtest.BaseURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	args := []string{"-postgres", base, "-taskgate", bin, "-duration", "250ms", "-warmup", "50ms", "-clients", "4", "-replicas", "1,2"}
	if code := run(ctx, args, &stdout, &stderr, "400"); code != 0 {
		t.Fatalf("run = %d, want 0; stderr:\n%s", code, stderr.String())
	}
	if out := stdout.String(); !strings.Contains(out, "accept, 2 replica(s)") || !strings.Contains(out, "child processes") || !strings.Contains(out, "MCP ceiling") {
		t.Errorf("the table does not show two child-process replicas and the MCP ceiling:\n%s", out)
	}
}
