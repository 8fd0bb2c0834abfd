package upstream

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/internal/syncbuf"
	"github.com/taskgate/taskgate/internal/testwait"
)

// TestUpstreamURLCredentialsStayHidden: an upstream URL's userinfo and
// query values reach neither the log, nor the endpoint receipts record,
// nor the errors /readyz logs, whether the upstream cannot be reached or
// answers with an error.
func TestUpstreamURLCredentialsStayHidden(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	// The failing upstream records what credentials it was sent: hidden
	// from people, they must still reach it.
	var sent syncbuf.Buffer
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, _ := r.BasicAuth()
		fmt.Fprintf(&sent, "%s:%s?%s\n", user, pass, r.URL.RawQuery)
		http.Error(w, "no such thing here", http.StatusTeapot)
	}))
	t.Cleanup(failing.Close)

	for name, host := range map[string]string{"unreachable": closed, "answering an error": strings.TrimPrefix(failing.URL, "http://")} {
		t.Run(name, func(t *testing.T) {
			var logs logBuffer
			cfg := &config.Upstream{Name: "hosted_test", URL: "http://svc:PASS@" + host + "/mcp?api_key=SECRET&v=2", Timeout: 2 * time.Second}
			_, u := startPool(t, cfg, &Options{Logger: logs.logger()})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			testwait.Until(t, ctx, "a failed connection logged", func() (bool, error) {
				return strings.Contains(logs.String(), "connecting to upstream failed"), nil
			})
			ready := u.Ready(ctx)
			if ready == nil {
				t.Fatal("Ready() = nil, want the connection's error")
			}
			for what, text := range map[string]string{"log": logs.String(), "Endpoint()": u.Endpoint(), "Ready()": ready.Error()} {
				for _, secret := range []string{"PASS", "SECRET"} {
					if strings.Contains(text, secret) {
						t.Errorf("%s holds the credential %s: %s", what, secret, text)
					}
				}
			}
			if name == "answering an error" && !strings.Contains(sent.String(), "svc:PASS?api_key=SECRET&v=2\n") {
				t.Errorf("the upstream was sent %q, want the configured user, password and query", sent.String())
			}
			if want := "http://REDACTED:REDACTED@" + host + "/mcp?api_key=REDACTED&v=REDACTED"; u.Endpoint() != want {
				t.Errorf("Endpoint() = %q, want %q", u.Endpoint(), want)
			}
		})
	}
}
