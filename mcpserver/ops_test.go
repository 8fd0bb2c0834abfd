package mcpserver_test

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/taskgate/taskgate/internal/buildinfo"
	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/taskwire"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestHealthReadinessMetrics(t *testing.T) {
	h := harness(t, nil)
	base := strings.TrimSuffix(h.MCPURL(), "/mcp")
	if code, body := get(t, base+"/healthz"); code != 200 || !strings.Contains(body, "ok") {
		t.Fatalf("/healthz = %d %q", code, body)
	}
	if code, body := get(t, base+"/readyz"); code != 200 || !strings.Contains(body, `"ready":true`) {
		t.Fatalf("/readyz = %d %s", code, body)
	}
	cs := connect(t, h, "acme", fixtures.EraExtension)
	build := buildinfo.Read()
	if got := cs.InitializeResult().ServerInfo; got == nil || got.Name != "taskgate" || got.Version != build.Version {
		t.Errorf("serverInfo = %+v, want taskgate %s as taskgate version prints", got, build.Version)
	}
	if _, _, err := taskwire.CallToolAsTask(testCtx(t), cs, fixtures.RunSuiteCall("op-metrics", nil), nil); err != nil {
		t.Fatal(err)
	}
	code, body := get(t, base+"/metrics")
	for _, want := range []string{fmt.Sprintf(`taskgate_build_info{goversion=%q,revision=%q,version=%q} 1`, build.GoVersion, build.Revision, build.Version),
		`taskgate_decisions_total{decision="created",reason=""} 1`, "taskgate_open_tasks", "taskgate_upstream_request_seconds_bucket",
		`taskgate_upstream_connected{upstream="hosted_test"} 1`, `taskgate_upstream_restarts_total{upstream="hosted_test"} 0`} {
		if code != 200 || !strings.Contains(body, want) {
			t.Fatalf("/metrics (%d) lacks %q", code, want)
		}
	}
	// On SQLite the ledger's commits are counted: the acceptance above
	// was one at least.
	if _, ok := h.Store.(interface{ Commits() int64 }); ok || h.Store.Dialect() == "sqlite" {
		var commits float64
		for line := range strings.Lines(body) {
			if v, ok := strings.CutPrefix(line, "taskgate_ledger_commits_total "); ok {
				commits, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
			}
		}
		if commits < 1 {
			t.Errorf("/metrics: taskgate_ledger_commits_total is %v after an acceptance, want at least 1", commits)
		}
	}
	// A required upstream that stops answering makes the gateway unready.
	h.StopProvider()
	var ready string
	testwait.Until(t, testCtx(t), "/readyz to report the stopped upstream unavailable", func() (bool, error) {
		var code int
		code, ready = get(t, base+"/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(ready, `"upstream hosted_test":"unavailable"`),
			fmt.Errorf("/readyz is %d %s", code, ready)
	})
	testwait.Until(t, testCtx(t), "the metrics to show the stopped upstream disconnected", func() (bool, error) {
		code, body := get(t, base+"/metrics")
		return code == 200 && strings.Contains(body, `taskgate_upstream_connected{upstream="hosted_test"} 0`),
			fmt.Errorf("/metrics (%d) does not show hosted_test disconnected", code)
	})
	// Unauthenticated: it names the upstream, never its address or why it
	// failed.
	host := strings.TrimPrefix(strings.TrimSuffix(h.SimURL, "/mcp"), "http://")
	for _, never := range []string{host, "refused", "dial", "connect"} {
		if strings.Contains(ready, never) {
			t.Errorf("/readyz says %s; it must not contain %q", ready, never)
		}
	}
}
