package upstream

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/sim/providersim"
)

func TestPlanRestart(t *testing.T) {
	t0 := time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	times := func(ds ...time.Duration) []time.Time {
		var out []time.Time
		for _, d := range ds {
			out = append(out, at(d))
		}
		return out
	}
	tests := []struct {
		name     string
		restarts []time.Time
		now      time.Time
		backoff  time.Duration
		budget   int
		want     restartPlan
	}{
		{"first crash: after the backoff", nil, at(0), time.Second, 5,
			restartPlan{At: at(time.Second)}},
		{"budget not yet spent", times(0, 10*time.Second, 20*time.Second, 30*time.Second), at(40 * time.Second), time.Second, 5,
			restartPlan{At: at(41 * time.Second)}},
		{"budget spent: when the oldest restart leaves the minute", times(0, 10*time.Second, 20*time.Second, 30*time.Second, 40*time.Second), at(45 * time.Second), time.Second, 5,
			restartPlan{At: at(time.Minute), Spent: true}},
		{"the backoff itself lets the oldest restart leave the minute", times(0, 10*time.Second, 20*time.Second, 30*time.Second, 40*time.Second), at(45 * time.Second), 30 * time.Second, 5,
			restartPlan{At: at(75 * time.Second)}},
		{"restarts older than a minute do not count", times(0, 70*time.Second, 80*time.Second), at(90 * time.Second), time.Second, 2,
			restartPlan{At: at(time.Minute + 70*time.Second), Spent: true}},
		{"a restart exactly a minute before the start has left the minute", times(0, 10*time.Second), at(59 * time.Second), time.Second, 2,
			restartPlan{At: at(time.Minute)}},
		{"a budget of one", times(0), at(time.Second), time.Second, 1,
			restartPlan{At: at(time.Minute), Spent: true}},
		{"restarts at the same instant", times(5*time.Second, 5*time.Second, 5*time.Second), at(6 * time.Second), time.Second, 2,
			restartPlan{At: at(65 * time.Second), Spent: true}},
		{"no budget set counts as one", times(0), at(time.Second), time.Second, 0,
			restartPlan{At: at(time.Minute), Spent: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := planRestart(tt.restarts, tt.now, tt.backoff, tt.budget)
			if !got.At.Equal(tt.want.At) || got.Spent != tt.want.Spent {
				t.Errorf("planRestart = {At: +%s, Spent: %t}, want {At: +%s, Spent: %t}",
					got.At.Sub(t0), got.Spent, tt.want.At.Sub(t0), tt.want.Spent)
			}
			if got.Spent {
				// The planned start must itself keep to the budget.
				if n := inMinute(tt.restarts, got.At); n >= max(tt.budget, 1) {
					t.Errorf("a start at +%s would follow %d restarts within a minute, budget %d", got.At.Sub(t0), n, tt.budget)
				}
			}
		})
	}
}

func TestInMinuteAndRecent(t *testing.T) {
	t0 := time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)
	ts := []time.Time{t0, t0.Add(30 * time.Second), t0.Add(59 * time.Second), t0.Add(61 * time.Second)}
	now := t0.Add(90 * time.Second)
	if got := inMinute(ts, now); got != 2 {
		t.Errorf("inMinute = %d, want 2 (the times after %s)", got, now.Add(-time.Minute).Format(time.TimeOnly))
	}
	got := recent(ts, now)
	if len(got) != 2 || !got[0].Equal(ts[2]) || !got[1].Equal(ts[3]) {
		t.Errorf("recent = %v, want the last two", got)
	}
	if got := recent(nil, now); len(got) != 0 {
		t.Errorf("recent(nil) = %v, want none", got)
	}
}

// events counts what Options.StateChanged and Options.Restarted were told.
type events struct {
	mu        sync.Mutex
	states    []bool
	restarted int
}

func (e *events) options(o *Options) *Options {
	o.StateChanged = func(_ string, connected bool) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.states = append(e.states, connected)
	}
	o.Restarted = func(string) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.restarted++
	}
	return o
}

func (e *events) seen() ([]bool, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.states), e.restarted
}

func TestStdioChildThatKeepsCrashingSpendsItsBudget(t *testing.T) {
	var logs logBuffer
	var ev events
	cfg := stdioConfig("hosted_test", "crash")
	cfg.MaxRestartsPerMinute = 2
	_, u := startPool(t, cfg, ev.options(&Options{Logger: logs.logger()}))
	ctx := testCtx(t)

	// Started once and restarted twice, it crashed three times within a
	// minute: the third restart waits until the first leaves the minute.
	var budget *restartBudgetError
	testwait.Until(t, ctx, "the upstream to be unavailable for its restart budget", func() (bool, error) {
		err := u.Ready(ctx)
		return errors.As(err, &budget), err
	})
	if budget.crashes != 3 || budget.budget != 2 {
		t.Errorf("unavailable after %d crashes with budget %d, want 3 and 2", budget.crashes, budget.budget)
	}
	if left := time.Until(budget.next); left <= 0 || left > restartWindow {
		t.Errorf("next start in %s, want within the next minute", left)
	}
	if states, restarted := ev.seen(); len(states) != 0 || restarted != 2 {
		t.Errorf("StateChanged calls %v and %d restarts, want none (it never connected) and 2", states, restarted)
	}

	// Meanwhile a call is refused at once, not at its deadline.
	_, err := u.CallTool(ctx, &mcp.CallToolParams{Name: providersim.ToolEstimateSuite, Arguments: map[string]any{"suite": "smoke"}}, nil)
	if !errors.Is(err, ErrNotConnected) || !errors.As(err, &budget) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a call while unavailable = %v, want ErrNotConnected for the spent budget, before its deadline", err)
	}
	if err == nil || !strings.Contains(err.Error(), "upstream hosted_test is not connected: its process exited 3 times within a minute and max_restarts_per_minute is 2") {
		t.Errorf("error = %v, want it to name the upstream, the crashes and the budget", err)
	}
	log := logs.String()
	for _, want := range []string{"level=ERROR", "upstream=hosted_test", "crashes_last_minute=3", "max_restarts_per_minute=2", "next_start="} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
}

// A call that follows, at once, the failure of the call in flight when a
// stdio child died waits for the next child: the dead session is not
// used, even before the supervisor has withdrawn it. (A lookup after an
// uncertain send is such a call.)
func TestACallAfterTheChildDiedGoesToTheNextChild(t *testing.T) {
	_, u := startPool(t, stdioConfig("hosted_test", "tiny-legacy"), nil)
	ctx := testCtx(t)
	waitReady(ctx, t, u)
	first := u.pid()
	for run := range 3 {
		dying := u.pid()
		// The child is killed while the call waits for its answer.
		elicit := func(ctx context.Context, _ *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			if err := syscall.Kill(dying, syscall.SIGKILL); err != nil {
				return nil, err
			}
			<-ctx.Done()
			return nil, ctx.Err()
		}
		if _, err := u.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: askArgs{Label: "A"}}, &CallOptions{Elicit: elicit}); err == nil {
			t.Fatalf("run %d: the call in flight when its child died succeeded", run)
		}
		res, err := u.CallTool(ctx, &mcp.CallToolParams{Name: "count", Arguments: countArgs{Label: "after"}}, nil)
		if err != nil {
			t.Fatalf("run %d: a call right after the child died = %v, want it answered by the next child", run, err)
		}
		if got := text(res); got != "after" {
			t.Errorf("run %d: count = %q, want %q", run, got, "after")
		}
		if p := u.pid(); p == dying || p == first {
			t.Errorf("run %d: answered with child %d connected, want a new child", run, p)
		}
	}
}
