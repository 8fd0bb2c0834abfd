package main

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/sim/fixtures"
)

func TestParseEras(t *testing.T) {
	tests := []struct {
		in      string
		want    []fixtures.Era
		wantErr bool
	}{
		{in: "2026-07-28", want: []fixtures.Era{fixtures.EraExtension}},
		{in: "2025-11-25, 2026-07-28", want: []fixtures.Era{fixtures.EraLegacy, fixtures.EraExtension}},
		{in: "2026-07-28,2026-07-28", want: []fixtures.Era{fixtures.EraExtension}},
		{in: "", want: nil},
		{in: "2024-11-05", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseEras(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("parseEras(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("parseEras(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestCompareEraVerdicts(t *testing.T) {
	tests := []struct {
		name              string
		gateP50           float64
		gateRate          float64
		wantAdded         float64
		wantAddedMet      bool
		wantRatio         float64
		wantThroughputMet bool
	}{
		{name: "both met at the bounds", gateP50: 1.5, gateRate: 650, wantAdded: 0.5, wantAddedMet: true, wantRatio: 0.65, wantThroughputMet: true},
		{name: "both missed", gateP50: 1.75, gateRate: 640, wantAdded: 0.75, wantAddedMet: false, wantRatio: 0.64, wantThroughputMet: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			direct1 := measurement{Sessions: 1, P50Ms: 1.0, P99Ms: 2.0, CallsPerSec: 900}
			gate1 := measurement{Sessions: 1, P50Ms: tt.gateP50, P99Ms: 3.0, CallsPerSec: 600}
			directN := measurement{Sessions: 8, CallsPerSec: 1000, CPUMsPerCall: 0.5}
			gateN := measurement{Sessions: 8, CallsPerSec: tt.gateRate, CPUMsPerCall: 1.0}
			got := compareEra("2026-07-28", direct1, gate1, directN, gateN)
			added, ratio := find(t, got, "added p50"), find(t, got, "calls/s taskgate/direct, 8 sessions")
			if diff := added.Value - tt.wantAdded; diff > 1e-9 || diff < -1e-9 || added.Met == nil || *added.Met != tt.wantAddedMet {
				t.Errorf("added p50 = %v (met %v), want %v (met %v)", added.Value, deref(added.Met), tt.wantAdded, tt.wantAddedMet)
			}
			if diff := ratio.Value - tt.wantRatio; diff > 1e-9 || diff < -1e-9 || ratio.Met == nil || *ratio.Met != tt.wantThroughputMet {
				t.Errorf("throughput ratio = %v (met %v), want %v (met %v)", ratio.Value, deref(ratio.Met), tt.wantRatio, tt.wantThroughputMet)
			}
			if cpu := find(t, got, "cpu/call"); cpu.Value != 0.5 || cpu.Met != nil {
				t.Errorf("cpu/call ratio = %v (met %v), want 0.5 without a target", cpu.Value, deref(cpu.Met))
			}
		})
	}
}

func find(t *testing.T, cs []comparison, part string) comparison {
	t.Helper()
	for _, c := range cs {
		if strings.Contains(c.Name, part) {
			return c
		}
	}
	t.Fatalf("no comparison named like %q in %v", part, cs)
	return comparison{}
}

// deref shows what p points to, or nil, in a message.
func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
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
		{args: []string{"-eras", "1999-01-01"}, want: "unknown protocol era"},
		{args: []string{"-eras", ","}, want: "names no protocol era"},
		{args: []string{"-pass=false", "-accept=false"}, want: "leave nothing to measure"},
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

// TestRunMeasuresEverything runs the whole benchmark briefly against a real
// provider and gateway and checks the shape of what it reports, not its
// numbers.
func TestRunMeasuresEverything(t *testing.T) {
	if testing.Short() {
		t.Skip("starts several gateways; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	args := []string{"-duration", "250ms", "-warmup", "50ms", "-sessions", "2", "-json", "-dir", t.TempDir()}
	if code := run(ctx, args, &stdout, &stderr, "100"); code != 0 {
		t.Fatalf("run = %d, want 0; stderr:\n%s", code, stderr.String())
	}
	var rep results
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("the -json output does not decode: %v\n%s", err, stdout.String())
	}
	type key struct {
		path, era, worker string
		sessions          int
	}
	var got []key
	for _, m := range rep.Measurements {
		got = append(got, key{m.Path, m.Era, m.Worker, m.Sessions})
		if m.Calls <= 0 || m.CallsPerSec <= 0 || m.P50Ms <= 0 || m.P99Ms < m.P50Ms {
			t.Errorf("%s %s %d sessions: calls %d, %v calls/s, p50 %v, p99 %v; want calls, a rate and ordered percentiles",
				m.Path, m.Era, m.Sessions, m.Calls, m.CallsPerSec, m.P50Ms, m.P99Ms)
		}
		if m.Path == "accept" && (m.Undispatched == nil || m.Created < m.Calls || int64(*m.Undispatched) > m.Created) {
			t.Errorf("accept (worker %s) %d sessions: created %d, undispatched %v for %d calls; want created >= calls >= 0 undispatched",
				m.Worker, m.Sessions, m.Created, deref(m.Undispatched), m.Calls)
		}
	}
	want := []key{
		{"direct", "2026-07-28", "", 1}, {"taskgate", "2026-07-28", "", 1}, {"direct", "2026-07-28", "", 2}, {"taskgate", "2026-07-28", "", 2},
		{"direct", "2025-11-25", "", 1}, {"taskgate", "2025-11-25", "", 1}, {"direct", "2025-11-25", "", 2}, {"taskgate", "2025-11-25", "", 2},
		{"accept", "2026-07-28", "on", 1}, {"accept", "2026-07-28", "on", 2}, {"accept", "2026-07-28", "stopped", 1}, {"accept", "2026-07-28", "stopped", 2},
	}
	if !slices.Equal(got, want) {
		t.Errorf("measurements = %v, want %v", got, want)
	}
	targets := 0
	for _, c := range rep.Comparisons {
		if c.Met != nil {
			targets++
		}
	}
	if targets != 4 {
		t.Errorf("%d comparisons carry a target, want 4 (two per era)", targets)
	}
	if rep.Machine.GOMAXPROCS < 1 || rep.Machine.GoVersion == "" || rep.Machine.Synchronous != "full" {
		t.Errorf("machine facts = %+v, want GOMAXPROCS, the Go version and synchronous full", rep.Machine)
	}
}
