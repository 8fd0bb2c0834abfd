package mcpserver_test

import (
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/internal/buildinfo"
	"github.com/taskgate/taskgate/mcpserver"
)

// gathered is every sample of reg's metric family name, by its upstream
// label.
func gathered(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var upstream string
			for _, l := range m.GetLabel() {
				if l.GetName() == "upstream" {
					upstream = l.GetValue()
				}
			}
			switch {
			case m.GetGauge() != nil:
				out[upstream] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				out[upstream] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

func TestUpstreamMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := mcpserver.NewMetrics(reg, nil)
	stateChanged := m.UpstreamStates([]*config.Upstream{{Name: "hosted_test"}, {Name: "local_build"}, nil})

	// Configured upstreams show up before their supervisors say anything.
	if got := gathered(t, reg, "taskgate_upstream_connected"); len(got) != 2 || got["hosted_test"] != 0 || got["local_build"] != 0 {
		t.Errorf("taskgate_upstream_connected before any session = %v, want 0 for both upstreams", got)
	}
	if got := gathered(t, reg, "taskgate_upstream_restarts_total"); len(got) != 2 || got["hosted_test"] != 0 || got["local_build"] != 0 {
		t.Errorf("taskgate_upstream_restarts_total before any restart = %v, want 0 for both upstreams", got)
	}

	stateChanged("hosted_test", true)
	stateChanged("local_build", true)
	stateChanged("local_build", false)
	m.UpstreamRestarted("local_build")
	m.UpstreamRestarted("local_build")
	stateChanged("local_build", true)
	if got := gathered(t, reg, "taskgate_upstream_connected"); got["hosted_test"] != 1 || got["local_build"] != 1 {
		t.Errorf("taskgate_upstream_connected = %v, want 1 for both upstreams", got)
	}
	stateChanged("hosted_test", false)
	if got := gathered(t, reg, "taskgate_upstream_connected"); got["hosted_test"] != 0 {
		t.Errorf("taskgate_upstream_connected after a withdrawn session = %v, want 0 for hosted_test", got)
	}
	if got := gathered(t, reg, "taskgate_upstream_restarts_total"); got["hosted_test"] != 0 || got["local_build"] != 2 {
		t.Errorf("taskgate_upstream_restarts_total = %v, want hosted_test 0 and local_build 2", got)
	}
}

// TestBuildInfoMetric checks that /metrics names the build this binary is.
func TestBuildInfoMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	mcpserver.NewMetrics(reg, nil)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := buildinfo.Read()
	for _, mf := range mfs {
		if mf.GetName() != "taskgate_build_info" {
			continue
		}
		if len(mf.GetMetric()) != 1 {
			t.Fatalf("taskgate_build_info has %d series, want 1", len(mf.GetMetric()))
		}
		m := mf.GetMetric()[0]
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if m.GetGauge().GetValue() != 1 || labels["version"] != want.Version || labels["revision"] != want.Revision || labels["goversion"] != runtime.Version() {
			t.Errorf("taskgate_build_info = %v %v, want 1 with version %s, revision %s, goversion %s", m.GetGauge().GetValue(), labels, want.Version, want.Revision, runtime.Version())
		}
		return
	}
	t.Fatal("the registry has no taskgate_build_info")
}
