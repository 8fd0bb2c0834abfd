package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
)

// TestHostileUpstreamURLCredentials runs `taskgate serve` with upstream
// URLs that carry a password and an api_key: one provider that refuses
// any request without them, one that nothing listens on. The provider is
// sent both and runs the call, while neither appears in the gateway's
// log, in what /readyz logs of the down upstream, nor in the receipt an
// agent's key reads (JSON, YAML and Markdown).
func TestHostileUpstreamURLCredentials(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	dir := t.TempDir()
	listen := freeAddr(t)
	db := "sqlite:" + filepath.Join(dir, "ledger.db")

	sim := providersim.New(nil)
	provider := serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, _ := r.BasicAuth()
		if user != "svc" || pass != "PASS" || r.URL.Query().Get("api_key") != "SECRET" {
			http.Error(w, "the provider wants its credentials", http.StatusUnauthorized)
			return
		}
		sim.HTTPHandler().ServeHTTP(w, r)
	}))
	withCredentials := func(endpoint string) string {
		return strings.Replace(endpoint, "http://", "http://svc:PASS@", 1) + "?api_key=SECRET"
	}
	cfg := fixtures.ConfigYAML(withCredentials(provider), listen, db, fixtures.ConfigOptions{}) +
		"  - name: down\n    url: " + withCredentials("http://"+freeAddr(t)+"/mcp") + "\n"
	path := filepath.Join(dir, "taskgate.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	key := apiKey(t, ctx, db, "acme")

	g := startGateway(t, path)
	g.waitOutput(t, ctx, "taskgate is serving")
	base := "http://" + listen
	cs := dial(t, ctx, base+"/mcp", key, func() {})
	testwait.Until(t, ctx, "the provider's tools to be listed", func() (bool, error) {
		names, err := toolNames(ctx, cs)
		return names[fixtures.RunSuiteTool], fmt.Errorf("tools %v, %v", names, err)
	})
	res, err := cs.CallTool(ctx, fixtures.RunSuiteCall("op-inert-url", nil))
	if err != nil || res.IsError {
		t.Fatalf("run_suite through an upstream URL with credentials = %v, %v", res, err)
	}
	if code, err := getStatus(base + "/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz with the down upstream = %d, %v; want 503", code, err)
	}
	g.waitOutput(t, ctx, "not ready")

	shown := map[string]string{}
	for _, format := range []string{"json", "yaml", "md"} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/operations/op-inert-url/receipt?format="+format, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "REDACTED@") {
			t.Errorf("receipt (%s) with the agent's key: %d\n%s\nwant it with the endpoint redacted", format, resp.StatusCode, body)
		}
		shown["receipt ("+format+")"] = string(body)
	}
	shown["the gateway's log"] = g.out.String()
	for what, text := range shown {
		for _, secret := range []string{"PASS", "SECRET"} {
			if strings.Contains(text, secret) {
				t.Errorf("%s holds the upstream's credential %s:\n%s", what, secret, text)
			}
		}
	}
}
