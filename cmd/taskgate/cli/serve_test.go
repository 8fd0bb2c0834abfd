package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/cmd/taskgate/cli"
	"github.com/taskgate/taskgate/internal/syncbuf"
	"github.com/taskgate/taskgate/internal/testwait"
)

// TestServeSDKPathSwitch: TASKGATE_TEST_SDK_PATH=1 reaches the gateway,
// which warns that it is on; a value that is neither 1 nor true is refused
// before anything starts.
func TestServeSDKPathSwitch(t *testing.T) {
	l := newLedger(t)
	cfg := filepath.Join(t.TempDir(), "taskgate.yaml")
	y := "database: " + l.db + "\nlisten: 127.0.0.1:0\nupstreams:\n  - name: hosted_test\n    url: http://127.0.0.1:1/mcp\n    required: false\n"
	if err := os.WriteFile(cfg, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	serve := func(ctx context.Context, value string, stderr *syncbuf.Buffer) int {
		getenv := func(name string) string {
			if name == "TASKGATE_TEST_SDK_PATH" {
				return value
			}
			return ""
		}
		return cli.Main(ctx, []string{"--db", l.db, "serve", "--config", cfg}, &syncbuf.Buffer{}, stderr, getenv)
	}
	const warning = "pass-through calls take the SDK path only: a test switch, slower, not for production"

	var refused syncbuf.Buffer
	if code := serve(context.Background(), "yes", &refused); code != 1 || !strings.Contains(refused.String(), `Error: TASKGATE_TEST_SDK_PATH="yes"`) ||
		strings.Contains(refused.String(), "serving") {
		t.Fatalf("serve with TASKGATE_TEST_SDK_PATH=yes: exit %d, stderr:\n%s\nwant exit 1 naming the variable, nothing served", code, refused.String())
	}

	for _, tc := range []struct {
		value string
		warns bool
	}{{"1", true}, {"", false}} {
		ctx, cancel := context.WithCancel(context.Background())
		var stderr syncbuf.Buffer
		done := make(chan int, 1)
		go func() { done <- serve(ctx, tc.value, &stderr) }()
		wait, stop := context.WithTimeout(context.Background(), time.Minute)
		testwait.Until(t, wait, "taskgate serve to serve", func() (bool, error) {
			select {
			case code := <-done:
				t.Fatalf("serve with TASKGATE_TEST_SDK_PATH=%q exited %d before serving, stderr:\n%s", tc.value, code, stderr.String())
			default:
			}
			return strings.Contains(stderr.String(), "taskgate serving MCP at "), nil
		})
		stop()
		cancel()
		if code := <-done; code != 0 {
			t.Fatalf("serve with TASKGATE_TEST_SDK_PATH=%q: exit %d, stderr:\n%s", tc.value, code, stderr.String())
		}
		if got := strings.Contains(stderr.String(), warning); got != tc.warns {
			t.Errorf("serve with TASKGATE_TEST_SDK_PATH=%q warned %v; want %v. stderr:\n%s", tc.value, got, tc.warns, stderr.String())
		}
	}
}
