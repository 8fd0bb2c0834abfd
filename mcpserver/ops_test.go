package mcpserver_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/fixtures"
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
	if _, _, err := taskwire.CallToolAsTask(testCtx(t), cs, fixtures.RunSuiteCall("op-metrics", nil), nil); err != nil {
		t.Fatal(err)
	}
	code, body := get(t, base+"/metrics")
	for _, want := range []string{`taskgate_decisions_total{decision="created",reason=""} 1`, "taskgate_open_tasks", "taskgate_upstream_request_seconds_bucket"} {
		if code != 200 || !strings.Contains(body, want) {
			t.Fatalf("/metrics (%d) lacks %q", code, want)
		}
	}
	// A required upstream that stops answering makes the gateway unready.
	h.StopProvider()
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body := get(t, base+"/readyz")
		if code == http.StatusServiceUnavailable && strings.Contains(body, `"upstream hosted_test":"unavailable"`) {
			// Unauthenticated: it names the upstream, never its address
			// or why it failed.
			host := strings.TrimPrefix(strings.TrimSuffix(h.SimURL, "/mcp"), "http://")
			for _, never := range []string{host, "refused", "dial", "connect"} {
				if strings.Contains(body, never) {
					t.Errorf("/readyz says %s; it must not contain %q", body, never)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d %s with the upstream gone", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
