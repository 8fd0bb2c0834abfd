package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
	"github.com/taskgate/taskgate/taskwire"
)

// headerLog records the X-Upstream-Token header of every request an
// upstream receives.
type headerLog struct {
	mu   sync.Mutex
	seen []string
}

func (h *headerLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.seen = append(h.seen, r.Header.Get("X-Upstream-Token"))
		h.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

func (h *headerLog) last() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.seen) == 0 {
		return ""
	}
	return h.seen[len(h.seen)-1]
}

// TestReloadKeepsTheSession reloads a running `taskgate serve` process
// while one 2025-11-25 session stays open: an added upstream's tools
// appear to the session; a rotated upstream header is on the next request
// to that upstream (by SIGHUP); an invalid file is refused with its file,
// line and field and the running configuration stays; an upstream removed
// while a consequential operation runs on it lets the operation complete,
// with one job at the provider.
func TestReloadKeepsTheSession(t *testing.T) {
	ctx := testCtx(t, 3*time.Minute)
	dir := t.TempDir()
	listen := freeAddr(t)
	db := "sqlite:" + filepath.Join(dir, "ledger.db")
	socket := filepath.Join(dir, "control.sock")

	sim := providersim.New(&providersim.Options{JobDuration: 3 * time.Second})
	t.Cleanup(func() { sim.Close() })
	simURL := serveHandler(t, sim.HTTPHandler())
	oneURL := serveMCP(t, echoServer("one"))
	var tokens headerLog
	twoURL := serveHandler(t, tokens.wrap(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer("two") }, nil)))

	base := fixtures.ConfigYAML(simURL, listen, db, fixtures.ConfigOptions{}) + "control_socket: " + socket + "\n"
	withHostedTest, withoutHostedTest := splitHostedTest(t, base)
	one := "  - name: one\n    url: " + oneURL + "\n"
	two := func(token string) string {
		return "  - name: two\n    url: " + twoURL + "\n    headers:\n      X-Upstream-Token: " + token + "\n"
	}
	path := filepath.Join(dir, "taskgate.yaml")
	write := func(cfg string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(withHostedTest + one)
	key := apiKey(t, ctx, db, "acme")
	g := startGateway(t, path)
	g.waitOutput(t, ctx, "taskgate is serving")

	var changed atomic.Int32
	cs := dial(t, ctx, "http://"+listen+"/mcp", key, func() { changed.Add(1) })
	sessionID := cs.ID()
	waitTools(t, ctx, cs, "one.echo", fixtures.RunSuiteTool)

	// Add an upstream.
	write(withHostedTest + one + two("v1"))
	out := reload(t, ctx, path)
	if !strings.Contains(out, "reloaded: upstream two added") {
		t.Errorf("taskgate reload printed %q, want it to say upstream two was added", out)
	}
	waitTools(t, ctx, cs, "two.echo")
	// The notification comes on the session's stream, which may lag the
	// list itself.
	testwait.Until(t, ctx, "the session to be told the tool list changed", func() (bool, error) {
		return changed.Load() > 0, errors.New("no tools/list_changed yet")
	})
	callEcho(t, ctx, cs, "two.echo", "two: a")
	if got := tokens.last(); got != "v1" {
		t.Errorf("upstream two got X-Upstream-Token %q, want v1", got)
	}

	// Rotate its credential, by SIGHUP.
	write(withHostedTest + one + two("v2"))
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	g.waitOutput(t, ctx, "upstream two reconnects with a new headers")
	testwait.Until(t, ctx, "a request to upstream two to carry the new header", func() (bool, error) {
		callEcho(t, ctx, cs, "two.echo", "two: b")
		return tokens.last() == "v2", fmt.Errorf("last X-Upstream-Token %q", tokens.last())
	})

	// An invalid file is refused; the running configuration stays.
	write(withHostedTest + one + two("v2") + "    timeout: soon\n")
	cmd := exec.CommandContext(ctx, gatewayBinary, "reload", "--config", path)
	bad, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("taskgate reload of an invalid file succeeded:\n%s", bad)
	}
	if want := path + ":"; !strings.Contains(string(bad), want) || !strings.Contains(string(bad), "upstreams[2].timeout") {
		t.Errorf("taskgate reload of an invalid file said %q; want the file, its line and upstreams[2].timeout", bad)
	}
	callEcho(t, ctx, cs, "two.echo", "two: c")

	// Remove an upstream while a consequential operation runs on it.
	tasks, err := fixtures.Dial(ctx, "http://"+listen+"/mcp", key, fixtures.EraExtension, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tasks.Close() })
	task, _, err := taskwire.CallToolAsTask(ctx, tasks, fixtures.RunSuiteCall("op-during-reload", nil), nil)
	if err != nil || task == nil {
		t.Fatalf("run_suite as a task = %v, %v", task, err)
	}
	testwait.Until(t, ctx, "the provider to start the job", func() (bool, error) {
		return len(sim.Jobs()) == 1, fmt.Errorf("%d jobs", len(sim.Jobs()))
	})
	write(withoutHostedTest + one + two("v2"))
	if out := reload(t, ctx, path); !strings.Contains(out, "reloaded: upstream hosted_test removed") {
		t.Errorf("taskgate reload printed %q, want it to say hosted_test was removed", out)
	}
	testwait.Until(t, ctx, "the removed upstream's tools to be withdrawn", func() (bool, error) {
		names, err := toolNames(ctx, cs)
		return err == nil && !names[fixtures.RunSuiteTool], fmt.Errorf("tools %v, %v", names, err)
	})
	done, err := taskwire.AwaitTask(ctx, tasks, task.ID, 100*time.Millisecond)
	if err != nil || done.Status != taskwire.StatusCompleted {
		t.Fatalf("the operation on the removed upstream ended %+v, %v; want completed", done, err)
	}
	if jobs := sim.Jobs(); len(jobs) != 1 {
		t.Errorf("the provider has %d jobs, want 1", len(jobs))
	}
	g.waitOutput(t, ctx, "removed upstream closed")

	// The session opened before the first reload still works.
	callEcho(t, ctx, cs, "one.echo", "one: still here")
	if cs.ID() != sessionID {
		t.Errorf("session ID changed from %s to %s", sessionID, cs.ID())
	}
}

// serveHandler serves h on a loopback port until the test ends and returns
// its /mcp URL.
func serveHandler(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/mcp"
}

// splitHostedTest returns cfg, which ends in its upstreams list, as it is
// and without the hosted_test upstream, both ready for more upstreams.
func splitHostedTest(t *testing.T, cfg string) (with, without string) {
	t.Helper()
	const first = "  - name: hosted_test\n"
	i := strings.Index(cfg, first)
	if i < 0 {
		t.Fatalf("the harness configuration has no hosted_test upstream to remove:\n%s", cfg)
	}
	// The upstream's block ends at the next top-level key.
	j := len(cfg)
	for k := i + len(first); k < len(cfg); {
		end := strings.IndexByte(cfg[k:], '\n')
		if end < 0 {
			break
		}
		if line := cfg[k : k+end]; line != "" && line[0] != ' ' {
			j = k
			break
		}
		k += end + 1
	}
	// control_socket follows the list; keep it above the upstreams.
	rest := cfg[j:]
	head := cfg[:i]
	at := strings.Index(head, "upstreams:\n")
	head = head[:at] + rest + head[at:]
	return head + cfg[i:j], head
}

// reload runs taskgate reload and returns what it printed.
func reload(t *testing.T, ctx context.Context, path string) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, gatewayBinary, "reload", "--config", path).CombinedOutput()
	if err != nil {
		t.Fatalf("taskgate reload: %v\n%s", err, out)
	}
	return string(out)
}

// waitTools waits until the session lists every named tool.
func waitTools(t *testing.T, ctx context.Context, cs *mcp.ClientSession, names ...string) {
	t.Helper()
	testwait.Until(t, ctx, "tools "+strings.Join(names, ", ")+" to be listed", func() (bool, error) {
		got, err := toolNames(ctx, cs)
		if err != nil {
			return false, err
		}
		for _, n := range names {
			if !got[n] {
				return false, fmt.Errorf("tools %v", got)
			}
		}
		return true, nil
	})
}

// callEcho calls an echo tool and checks its answer.
func callEcho(t *testing.T, ctx context.Context, cs *mcp.ClientSession, tool, want string) {
	t.Helper()
	text := strings.TrimPrefix(want, strings.SplitN(want, ": ", 2)[0]+": ")
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": text}})
	if err != nil || res.IsError || fixtures.ResultText(res) != want {
		t.Fatalf("%s = %v, %v; want %q", tool, res, err, want)
	}
}
