package upstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/internal/legacyhttp"
	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/sim/providersim"
	"github.com/taskgate/taskgate/taskwire"
)

// credentialCheck counts requests with and without the gateway's credential.
type credentialCheck struct {
	next          http.Handler
	want          string
	with, without atomic.Int64
}

func (c *credentialCheck) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") == c.want {
		c.with.Add(1)
	} else {
		c.without.Add(1)
	}
	c.next.ServeHTTP(w, r)
}

// awaitTask polls GetTask until the task is terminal.
func awaitTask(ctx context.Context, t *testing.T, u *Upstream, id string) *taskwire.Task {
	t.Helper()
	var task *taskwire.Task
	testwait.Until(t, ctx, "task "+id+" to end", func() (bool, error) {
		var err error
		if task, err = u.GetTask(ctx, id); err != nil {
			t.Fatalf("GetTask(%s): %v", id, err)
		}
		return task.Status.IsTerminal(), fmt.Errorf("task is still %s", task.Status)
	})
	return task
}

// findJob returns the simulator's job for an idempotency key.
func findJob(s *providersim.Sim, key string) (providersim.Job, bool) {
	for _, j := range s.Jobs() {
		if j.IdempotencyKey == key {
			return j, true
		}
	}
	return providersim.Job{}, false
}

func TestHTTPProviderInBothEras(t *testing.T) {
	tests := []struct {
		name         string
		legacy       bool // the server refuses server/discover
		wantProtocol string
		wantEra      taskwire.Era
	}{
		{"2026-07-28", false, "2026-07-28", taskwire.EraExtension},
		{"2025-11-25", true, protocolLegacy, taskwire.EraLegacy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim := providersim.New(&providersim.Options{JobDuration: simJob})
			t.Cleanup(func() { sim.Close() })
			var h http.Handler = sim.HTTPHandler()
			if tt.legacy {
				h = legacyhttp.RefuseDiscover(h, nil)
			}
			creds := &credentialCheck{next: h, want: "Bearer gateway-secret"}
			srv := httptest.NewServer(creds)
			t.Cleanup(srv.Close)

			var obs observed
			_, u := startPool(t, &config.Upstream{
				Name:    "hosted_test",
				URL:     srv.URL + "/mcp",
				Headers: map[string]string{"Authorization": "Bearer gateway-secret"},
			}, &Options{Observe: obs.observe})
			ctx := testCtx(t)
			waitReady(ctx, t, u)

			if got := u.OffersTasks(); got != tt.wantEra {
				t.Errorf("OffersTasks() = %s, want %s", got, tt.wantEra)
			}
			tools, err := u.Tools(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if names := toolNames(tools); !slices.Contains(names, providersim.ToolRunSuite) || !slices.Contains(names, providersim.ToolEstimateSuite) {
				t.Errorf("Tools() = %v, want run_suite and estimate_suite among them", names)
			}
			if tt.legacy {
				i := slices.IndexFunc(tools, func(tool *mcp.Tool) bool { return tool.Name == providersim.ToolRunSuite })
				if got := taskwire.ToolTaskSupport(tools[i]); got == taskwire.TaskForbidden {
					t.Errorf("run_suite task support = %s, want what the upstream listed (optional or required)", got)
				}
			}
			if _, err := u.Tools(ctx); err != nil {
				t.Fatal(err)
			}
			if got := obs.count("hosted_test tools/list"); got != 1 {
				t.Errorf("tools/list sent %d times for two Tools calls, want 1 (cached)", got)
			}

			// A plain call.
			res, err := u.CallTool(ctx, &mcp.CallToolParams{Name: providersim.ToolEstimateSuite, Arguments: map[string]any{"suite": "smoke"}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := structured[providersim.EstimateResult](t, res); got.EstimateUSD != "18.00" {
				t.Errorf("estimate_suite = %+v, want 18.00", got)
			}

			// A plain call whose idempotency key travels as a per-call header.
			res, err = u.CallTool(ctx, &mcp.CallToolParams{Name: providersim.ToolRunSuite, Arguments: map[string]any{"suite": "smoke"}},
				&CallOptions{Header: http.Header{"Idempotency-Key": {"op-plain"}}})
			if err != nil {
				t.Fatal(err)
			}
			if got := structured[providersim.SuiteResult](t, res); got.Status != providersim.StatusSucceeded {
				t.Errorf("run_suite = %+v, want succeeded", got)
			}
			if job, ok := findJob(sim, "op-plain"); !ok || job.KeySource != providersim.KeyFromHeader || job.Protocol != tt.wantProtocol {
				t.Errorf("job for op-plain = %+v (found %v), want one keyed from the header in protocol %s", job, ok, tt.wantProtocol)
			}

			// A task call, polled to completion.
			task, direct, err := u.CallToolAsTask(ctx, &mcp.CallToolParams{Name: providersim.ToolRunSuite, Arguments: map[string]any{"suite": "settlement"}}, nil,
				&CallOptions{Header: http.Header{"Idempotency-Key": {"op-task"}}})
			if err != nil {
				t.Fatal(err)
			}
			if task == nil {
				t.Fatalf("CallToolAsTask answered directly (%q), want a task", text(direct))
			}
			if done := awaitTask(ctx, t, u, task.ID); done.Status != taskwire.StatusCompleted {
				t.Errorf("task %s ended %s, want completed", task.ID, done.Status)
			}
			res, err = u.TaskResult(ctx, task.ID, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := structured[providersim.SuiteResult](t, res); got.JobID != task.ID || got.Status != providersim.StatusSucceeded {
				t.Errorf("task result = %+v, want job %s succeeded", got, task.ID)
			}
			if job, ok := findJob(sim, "op-task"); !ok || job.ID != task.ID || job.KeySource != providersim.KeyFromHeader {
				t.Errorf("job for op-task = %+v (found %v), want %s keyed from the header", job, ok, task.ID)
			}
			if got := len(sim.Jobs()); got != 2 {
				t.Errorf("the simulator ran %d jobs, want 2", got)
			}

			if creds.with.Load() == 0 || creds.without.Load() != 0 {
				t.Errorf("requests with the configured credential: %d, without: %d; want all with it", creds.with.Load(), creds.without.Load())
			}
			for _, m := range []string{"tools/call", "tasks/get"} {
				if obs.count("hosted_test "+m) == 0 {
					t.Errorf("Observe was not told of %s", m)
				}
			}
		})
	}
}

func TestTasksOffCallsPlainly(t *testing.T) {
	sim := providersim.New(&providersim.Options{JobDuration: simJob})
	t.Cleanup(func() { sim.Close() })
	srv := httptest.NewServer(sim.HTTPHandler())
	t.Cleanup(srv.Close)
	_, u := startPool(t, &config.Upstream{Name: "hosted_test", URL: srv.URL + "/mcp", Tasks: "off"}, nil)
	ctx := testCtx(t)
	waitReady(ctx, t, u)

	if got := u.OffersTasks(); got != taskwire.EraNone {
		t.Errorf("OffersTasks() with tasks off = %s, want none", got)
	}
	task, res, err := u.CallToolAsTask(ctx, &mcp.CallToolParams{Name: providersim.ToolRunSuite, Arguments: map[string]any{"suite": "smoke"}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if task != nil {
		t.Fatalf("CallToolAsTask with tasks off = task %s, want a direct result", task.ID)
	}
	if got := structured[providersim.SuiteResult](t, res); got.Status != providersim.StatusSucceeded {
		t.Errorf("run_suite = %+v, want succeeded", got)
	}
}

func TestStdioProviderRestartsAfterItsChildDies(t *testing.T) {
	var logs logBuffer
	var ev events
	_, u := startPool(t, stdioConfig("hosted_test", "providersim"), ev.options(&Options{Logger: logs.logger()}))
	ctx := testCtx(t)
	waitReady(ctx, t, u)

	if got, want := u.Endpoint(), os.Args[0]; got != want && got != `"`+want+`"` {
		t.Errorf("Endpoint() = %q, want the command %q", got, want)
	}
	if got := u.OffersTasks(); got != taskwire.EraExtension {
		t.Errorf("OffersTasks() = %s, want extension", got)
	}
	tools, err := u.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if names := toolNames(tools); !slices.Contains(names, providersim.ToolRunSuite) {
		t.Errorf("Tools() = %v, want run_suite among them", names)
	}

	task, direct, err := u.CallToolAsTask(ctx, &mcp.CallToolParams{Name: providersim.ToolRunSuite, Arguments: map[string]any{"suite": "smoke"}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if task == nil {
		t.Fatalf("CallToolAsTask answered directly (%q), want a task", text(direct))
	}
	awaitTask(ctx, t, u, task.ID)
	res, err := u.TaskResult(ctx, task.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := structured[providersim.SuiteResult](t, res); got.JobID != task.ID || got.Status != providersim.StatusSucceeded {
		t.Errorf("task result = %+v, want job %s succeeded", got, task.ID)
	}

	// A per-call header has no way to reach a stdio upstream.
	if _, err := u.CallTool(ctx, &mcp.CallToolParams{Name: providersim.ToolRunSuite, Arguments: map[string]any{"suite": "smoke"}},
		&CallOptions{Header: http.Header{"Idempotency-Key": {"op-header"}}}); err != nil {
		t.Fatal(err)
	}
	res, err = u.CallTool(ctx, &mcp.CallToolParams{Name: providersim.ToolLookupOperation, Arguments: map[string]any{"idempotency_key": "op-header"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := structured[providersim.LookupResult](t, res); got.Status != providersim.LookupNotFound {
		t.Errorf("lookup of a key sent as a header over stdio = %+v, want not_found", got)
	}

	first := u.pid()
	if first == 0 {
		t.Fatal("no stdio child while connected")
	}
	kill(t, first)
	testwait.Until(t, ctx, "a new stdio child", func() (bool, error) { p := u.pid(); return p != 0 && p != first, nil })
	testwait.Until(t, ctx, "the killed child to be waited for", func() (bool, error) { return processGone(first), nil })
	res, err = u.CallTool(ctx, &mcp.CallToolParams{Name: providersim.ToolEstimateSuite, Arguments: map[string]any{"suite": "smoke"}}, nil)
	if err != nil {
		t.Fatalf("a call after the restart: %v", err)
	}
	if got := structured[providersim.EstimateResult](t, res); got.EstimateUSD != "18.00" {
		t.Errorf("estimate_suite after the restart = %+v, want 18.00", got)
	}
	if states, restarted := ev.seen(); !slices.Equal(states, []bool{true, false, true}) || restarted != 1 {
		t.Errorf("StateChanged calls %v and %d restarts, want [true false true] and 1", states, restarted)
	}
	if !strings.Contains(logs.String(), "upstream connection lost; reconnecting") {
		t.Errorf("the restart was not logged; log:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "hosted_test simulator serving on stdio") {
		t.Errorf("the child's stderr was not logged; log:\n%s", logs.String())
	}
}

func TestCallsWhileDownFailNamingTheUpstream(t *testing.T) {
	t.Run("stdio child killed", func(t *testing.T) {
		// Backoffs this long keep the upstream down for the rest of the test.
		_, u := startPool(t, stdioConfig("hosted_test", "providersim"), &Options{RestartBackoff: time.Hour, MaxRestartBackoff: time.Hour})
		ctx := testCtx(t)
		waitReady(ctx, t, u)
		kill(t, u.pid())
		testwait.Until(t, ctx, "the upstream to be down", func() (bool, error) { return u.pid() == 0, nil })

		callCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		_, err := u.CallTool(callCtx, &mcp.CallToolParams{Name: providersim.ToolEstimateSuite, Arguments: map[string]any{"suite": "smoke"}}, nil)
		checkNotConnected(t, err)
		if err := u.Ready(ctx); !errors.Is(err, ErrNotConnected) || !strings.Contains(err.Error(), "hosted_test") {
			t.Errorf("Ready() while down = %v, want ErrNotConnected naming hosted_test", err)
		}
	})
	t.Run("nothing listening, bounded by the configured timeout", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL + "/mcp"
		srv.Close()
		_, u := startPool(t, &config.Upstream{Name: "hosted_test", URL: url, Timeout: 200 * time.Millisecond}, nil)
		// On a busy machine the first attempt may not have run within the
		// call's timeout; the call names the last attempt's failure once
		// there is one.
		testwait.Until(t, testCtx(t), "a failed connection attempt", func() (bool, error) {
			u.mu.Lock()
			defer u.mu.Unlock()
			return u.lastErr != nil, nil
		})
		_, err := u.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_suite"}, nil)
		checkNotConnected(t, err)
		if err == nil || !strings.Contains(err.Error(), "last connection attempt") {
			t.Errorf("error = %v, want it to say why the last connection attempt failed", err)
		}
		if _, err := u.GetTask(context.Background(), "hosted-suite-9912"); !errors.Is(err, ErrNotConnected) {
			t.Errorf("GetTask while down = %v, want ErrNotConnected", err)
		}
	})
}

func checkNotConnected(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, ErrNotConnected) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("call while down = %v, want ErrNotConnected after the deadline", err)
	}
	if err == nil || !strings.HasPrefix(err.Error(), "upstream hosted_test is not connected: ") {
		t.Errorf("error = %v, want it to begin %q", err, "upstream hosted_test is not connected: ")
	}
}

func TestCloseLeavesNoChildOrGoroutine(t *testing.T) {
	tests := []struct {
		name  string
		stdio bool
	}{
		{"stdio", true},
		{"http", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			var cfg *config.Upstream
			if tt.stdio {
				cfg = stdioConfig("hosted_test", "providersim")
			} else {
				sim := providersim.New(&providersim.Options{JobDuration: simJob})
				t.Cleanup(func() { sim.Close() })
				srv := httptest.NewServer(legacyhttp.RefuseDiscover(sim.HTTPHandler(), nil))
				t.Cleanup(srv.Close)
				cfg = &config.Upstream{Name: "hosted_test", URL: srv.URL + "/mcp", Timeout: 20 * time.Second}
			}
			before := runtime.NumGoroutine()
			p := NewPool([]*config.Upstream{cfg}, &Options{RestartBackoff: 20 * time.Millisecond})
			p.Start(ctx)
			u, _ := p.Get("hosted_test")
			waitReady(ctx, t, u)
			if _, err := u.CallTool(ctx, &mcp.CallToolParams{Name: providersim.ToolEstimateSuite, Arguments: map[string]any{"suite": "smoke"}}, nil); err != nil {
				t.Fatal(err)
			}
			pid := u.pid()
			if err := p.Close(); err != nil {
				t.Errorf("Close() = %v, want nil", err)
			}
			if tt.stdio && !processGone(pid) {
				t.Errorf("stdio child %d still exists after Close", pid)
			}
			if _, err := u.CallTool(ctx, &mcp.CallToolParams{Name: providersim.ToolEstimateSuite}, nil); !errors.Is(err, ErrNotConnected) {
				t.Errorf("a call after Close = %v, want ErrNotConnected", err)
			}
			testwait.Until(t, ctx, "the pool's goroutines to end after Close", func() (bool, error) {
				if after := runtime.NumGoroutine(); after > before {
					return false, goroutinesLeft{after, before}
				}
				return true, nil
			})
		})
	}
}

// goroutinesLeft says how many goroutines run and how many ran before,
// with every goroutine's stack, built only when the message is read.
type goroutinesLeft struct{ after, before int }

func (g goroutinesLeft) Error() string {
	buf := make([]byte, 1<<20)
	return fmt.Sprintf("%d goroutines, %d before NewPool:\n%s", g.after, g.before, buf[:runtime.Stack(buf, true)])
}

// serveOn serves h on addr ("127.0.0.1:0" for any port) until the returned
// func is called, which also drops every open connection.
func serveOn(t *testing.T, addr string, h http.Handler) (string, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			srv.Close()
			<-done
		})
	}
	t.Cleanup(stop)
	return ln.Addr().String(), stop
}

func TestHTTPUpstreamIsReconnectedAfterItRestarts(t *testing.T) {
	tests := []struct {
		name   string
		legacy bool
	}{
		{"2026-07-28", false},
		{"2025-11-25", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			handler := func() http.Handler {
				sim := providersim.New(&providersim.Options{JobDuration: simJob})
				t.Cleanup(func() { sim.Close() })
				if tt.legacy {
					return legacyhttp.RefuseDiscover(sim.HTTPHandler(), nil)
				}
				return sim.HTTPHandler()
			}
			addr, stop := serveOn(t, "127.0.0.1:0", handler())
			var logs logBuffer
			var ev events
			_, u := startPool(t, &config.Upstream{Name: "hosted_test", URL: "http://" + addr + "/mcp"}, ev.options(&Options{Logger: logs.logger()}))
			ctx := testCtx(t)
			waitReady(ctx, t, u)
			estimate := &mcp.CallToolParams{Name: providersim.ToolEstimateSuite, Arguments: map[string]any{"suite": "smoke"}}
			if _, err := u.CallTool(ctx, estimate, nil); err != nil {
				t.Fatal(err)
			}
			u.mu.Lock()
			before := u.conn
			u.mu.Unlock()

			stop()
			// A failed request makes the supervisor check the session.
			testwait.Until(t, ctx, "the upstream to be seen down", func() (bool, error) {
				u.Ready(ctx)
				u.mu.Lock()
				defer u.mu.Unlock()
				return u.conn == nil, nil
			})
			// The restarted server knows none of the old sessions.
			serveOn(t, addr, handler())
			waitReady(ctx, t, u)
			if _, err := u.CallTool(ctx, estimate, nil); err != nil {
				t.Fatalf("a call after the upstream came back: %v", err)
			}
			u.mu.Lock()
			after := u.conn
			u.mu.Unlock()
			if after == before {
				t.Error("the session from before the restart is still in use")
			}
			if states, restarted := ev.seen(); !slices.Equal(states, []bool{true, false, true}) || restarted != 1 {
				t.Errorf("StateChanged calls %v and %d restarts, want [true false true] and 1", states, restarted)
			}
			if !strings.Contains(logs.String(), "upstream connection lost; reconnecting") {
				t.Errorf("the reconnect was not logged; log:\n%s", logs.String())
			}
		})
	}
}
