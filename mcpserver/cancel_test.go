package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/taskgate/taskgate/internal/syncbuf"
	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
	"github.com/taskgate/taskgate/taskwire"
)

// opEvents returns the operation and the events of acme's operation opID.
func opEvents(t *testing.T, g *gateway, opID string) (*ledger.Operation, []*ledger.Event) {
	t.Helper()
	ctx := testCtx(t)
	op, err := g.store.OperationGet(ctx, &ledger.OperationGetParams{Tenant: "acme", OperationID: opID})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := g.store.EventList(ctx, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	return op, evs
}

func countKind(evs []*ledger.Event, k ledger.EventKind) int {
	n := 0
	for _, e := range evs {
		if e.Kind == k {
			n++
		}
	}
	return n
}

// TestCancelIsRecordedOnce: Claude Code sends tasks/cancel twice at once.
// The cancellation is one request: one cancellation_requested event, one
// cancel sent to the provider, one reversal.
func TestCancelIsRecordedOnce(t *testing.T) {
	g := startGateway(t, gatewayOptions{sim: providersim.Options{JobDuration: 30 * time.Second}})
	ctx := testCtx(t)
	cs := g.connect(t, fixtures.EraExtension)
	task, _, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall("op-twice", nil), nil)
	if err != nil || task == nil {
		t.Fatalf("tools/call = %v, %v", task, err)
	}
	testwait.Until(t, ctx, "the remote job is bound", func() (bool, error) {
		op, _ := opEvents(t, g, "op-twice")
		return op.State == ledger.StateRunning, nil
	})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if _, err := taskwire.CancelTask(ctx, cs, task.ID); err != nil {
				t.Errorf("tasks/cancel = %v; want the acknowledgement", err)
			}
		})
	}
	wg.Wait()
	testwait.Until(t, ctx, "the provider took the cancellation", func() (bool, error) {
		_, evs := opEvents(t, g, "op-twice")
		return countKind(evs, ledger.EventCancelSent) > 0, nil
	})
	testwait.Until(t, ctx, "the cancelled operation is reconciled", func() (bool, error) {
		_, evs := opEvents(t, g, "op-twice")
		return countKind(evs, ledger.EventReconciled) > 0, nil
	})
	_, evs := opEvents(t, g, "op-twice")
	for _, k := range []ledger.EventKind{ledger.EventCancellationRequested, ledger.EventCancelSent, ledger.EventEffectReversed} {
		if n := countKind(evs, k); n != 1 {
			t.Errorf("%d %s events after two tasks/cancel, want 1", n, k)
		}
	}
}

// TestCancelStatusFollowsWhatHappened: the task's status message says what
// came of the cancellation once the provider answered, not that it is
// still being asked.
func TestCancelStatusFollowsWhatHappened(t *testing.T) {
	g := startGateway(t, gatewayOptions{sim: providersim.Options{JobDuration: 30 * time.Second}})
	ctx := testCtx(t)
	cs := g.connect(t, fixtures.EraExtension)
	task, _, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall("op-status", nil), nil)
	if err != nil || task == nil {
		t.Fatalf("tools/call = %v, %v", task, err)
	}
	testwait.Until(t, ctx, "the remote job is bound", func() (bool, error) {
		op, _ := opEvents(t, g, "op-status")
		return op.State == ledger.StateRunning, nil
	})
	if _, err := taskwire.CancelTask(ctx, cs, task.ID); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, ctx, "the provider took the cancellation", func() (bool, error) {
		_, evs := opEvents(t, g, "op-status")
		return countKind(evs, ledger.EventCancelSent) > 0, nil
	})
	got, err := taskwire.GetTask(ctx, cs, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	job := g.sim.Jobs()[0].ID
	if got.Status != taskwire.StatusCancelled || strings.Contains(got.StatusMessage, "being asked") ||
		!strings.Contains(got.StatusMessage, job) || !strings.Contains(got.StatusMessage, "reversed") || !strings.Contains(got.StatusMessage, "charge was refunded") {
		t.Errorf("task after the provider cancelled job %s: %s %q; want cancelled, saying the job was stopped, its effect reversed and its charge refunded", job, got.Status, got.StatusMessage)
	}
}

// TestCallAfterCancelSaysSo: a call with the operation ID of a cancelled
// operation is told, in the message itself, that the operation was
// cancelled and that different work needs a new operation ID.
func TestCallAfterCancelSaysSo(t *testing.T) {
	g := startGateway(t, gatewayOptions{sim: providersim.Options{JobDuration: 30 * time.Second}})
	ctx := testCtx(t)
	cs := g.connect(t, fixtures.EraExtension)
	task, _, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall("op-gone", nil), nil)
	if err != nil || task == nil {
		t.Fatalf("tools/call = %v, %v", task, err)
	}
	if _, err := taskwire.CancelTask(ctx, cs, task.ID); err != nil {
		t.Fatal(err)
	}
	for _, era := range []fixtures.Era{fixtures.EraExtension, fixtures.EraLegacy, fixtures.EraPlain} {
		again := g.connect(t, era)
		var err error
		if era == fixtures.EraPlain {
			_, err = again.CallTool(ctx, fixtures.RunSuiteCall("op-gone", nil))
		} else {
			_, _, err = taskwire.CallToolAsTask(ctx, again, fixtures.RunSuiteCall("op-gone", nil), nil)
		}
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams ||
			!strings.Contains(werr.Message, "cancelled") || !strings.Contains(werr.Message, "new operation_id") {
			t.Errorf("%s: a call of cancelled operation op-gone = %v; want -32602 saying it was cancelled and a new operation_id is needed", era, err)
			continue
		}
		var data struct {
			Reason string `json:"reason"`
		}
		if json.Unmarshal(werr.Data, &data) != nil || data.Reason != "operation_cancelled" {
			t.Errorf("%s: data %s; want reason operation_cancelled", era, werr.Data)
		}
	}
}

// bindingStore is the real ledger, except that the worker's record of the
// remote job its send started waits, once, until release is closed: a
// cancellation lands in between.
type bindingStore struct {
	ledger.Store
	held    atomic.Bool
	binding chan struct{}
	release chan struct{}
}

func (s *bindingStore) Transition(ctx context.Context, p *ledger.TransitionParams) (*ledger.Operation, error) {
	if slices.Contains(p.From, ledger.StateSending) && len(p.RemoteJobs) > 0 && s.held.CompareAndSwap(false, true) {
		close(s.binding)
		<-s.release
	}
	return s.Store.Transition(ctx, p)
}

// TestCancelWhileTheJobIsRecorded: a cancellation that lands while the
// worker records the job its send started still cancels that job, once,
// and is no warning: a client may cancel at any time.
func TestCancelWhileTheJobIsRecorded(t *testing.T) {
	var logs syncbuf.Buffer
	bs := &bindingStore{binding: make(chan struct{}), release: make(chan struct{})}
	g := startGateway(t, gatewayOptions{
		sim:    providersim.Options{JobDuration: 30 * time.Second},
		store:  func(s ledger.Store) ledger.Store { bs.Store = s; return bs },
		logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	ctx := testCtx(t)
	cs := g.connect(t, fixtures.EraExtension)
	task, _, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall("op-bind", nil), nil)
	if err != nil || task == nil {
		t.Fatalf("tools/call = %v, %v", task, err)
	}
	select {
	case <-bs.binding:
	case <-ctx.Done():
		t.Fatal("the worker never recorded the remote job")
	}
	if _, err := taskwire.CancelTask(ctx, cs, task.ID); err != nil {
		t.Fatal(err)
	}
	close(bs.release)
	testwait.Until(t, ctx, "the provider's job is cancelled", func() (bool, error) {
		jobs := g.sim.Jobs()
		return len(jobs) == 1 && jobs[0].Status == providersim.StatusCancelled, nil
	})
	testwait.Until(t, ctx, "the cancelled operation is reconciled", func() (bool, error) {
		_, evs := opEvents(t, g, "op-bind")
		return countKind(evs, ledger.EventReconciled) > 0, nil
	})
	// The operation's own cancel job and the one the record of the job
	// queued may both ask before either records its answer: at least one
	// does, and no answer is an error.
	_, evs := opEvents(t, g, "op-bind")
	if n := countKind(evs, ledger.EventCancelSent); n == 0 {
		t.Errorf("no cancel_sent event; want the job's cancellation recorded")
	}
	for _, e := range evs {
		if e.Kind == ledger.EventCancelSent && strings.Contains(string(e.Data), `"error"`) {
			t.Errorf("cancel_sent %s; want the provider to have taken it", e.Data)
		}
	}
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "level=WARN") {
			t.Errorf("a cancellation racing the record of the job logged a warning: %s", line)
		}
	}
}

// TestCancelledRequestIsNotAnswered: on 2025-11-25, a tools/call the client
// cancelled with notifications/cancelled gets no answer, as the
// specification asks of a receiver.
func TestCancelledRequestIsNotAnswered(t *testing.T) {
	g := startGateway(t, gatewayOptions{sim: providersim.Options{JobDuration: 30 * time.Second}})
	session := rawSession(t, g)
	ctx := testCtx(t)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.url, strings.NewReader(
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"`+fixtures.RunSuiteTool+`","arguments":{"suite":"x","operation_id":"op-abandoned"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+g.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	type answer struct {
		body string
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		var b strings.Builder
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
		}
		answered <- answer{body: b.String()}
	}()
	testwait.Until(t, ctx, "the call is accepted", func() (bool, error) { return attemptOf(t, g, "op-abandoned") != nil, nil })
	rawPost(ctx, g, session, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"the user pressed Esc"}}`)
	select {
	case a := <-answered:
		if a.err != nil {
			t.Fatal(a.err)
		}
		if strings.Contains(a.body, `"id":2`) {
			t.Errorf("the cancelled request was answered: %s", a.body)
		}
	case <-ctx.Done():
		t.Fatal("the stream of the cancelled request never ended")
	}
}

// TestClientGivingUpIsNoWarning: a client without tasks that gives up on
// its call is logged, but not as a fault of the gateway.
func TestClientGivingUpIsNoWarning(t *testing.T) {
	var logs syncbuf.Buffer
	g := startGateway(t, gatewayOptions{
		sim:    providersim.Options{JobDuration: 30 * time.Second},
		logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	cs := g.connect(t, fixtures.EraPlain)
	ctx, giveUp := context.WithCancel(testCtx(t))
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, fixtures.RunSuiteCall("op-given-up", nil))
		done <- err
	}()
	testwait.Until(t, testCtx(t), "the call is accepted", func() (bool, error) { return attemptOf(t, g, "op-given-up") != nil, nil })
	giveUp()
	<-done
	testwait.Until(t, testCtx(t), "the gateway logs the client's going", func() (bool, error) {
		s := logs.String()
		return strings.Contains(s, "task host failed") || strings.Contains(s, "the client went away"), nil
	})
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "context canceled") {
			t.Errorf("a client giving up logged a warning: %s", line)
		}
	}
}

// TestClientCancelBeforeSend: under client_cancel: before_send, a cancel
// that comes after the call was sent is recorded, and the job runs to its
// end and is reconciled; each era is answered as its specification
// allows, in words that say so. A cancel before the send still cancels.
func TestClientCancelBeforeSend(t *testing.T) {
	g := startGateway(t, gatewayOptions{
		sim: providersim.Options{JobDuration: 3 * time.Second},
		yaml: func(y string) string {
			return strings.ReplaceAll(y, "retry_policy: lookup_then_attach", "client_cancel: before_send\n        retry_policy: lookup_then_attach")
		},
	})
	ctx := testCtx(t)
	for i, era := range []fixtures.Era{fixtures.EraExtension, fixtures.EraLegacy} {
		t.Run(string(era), func(t *testing.T) {
			opID := fmt.Sprintf("op-kept-%d", i)
			cs := g.connect(t, era)
			task, _, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall(opID, nil), nil)
			if err != nil || task == nil {
				t.Fatalf("tools/call = %v, %v", task, err)
			}
			testwait.Until(t, ctx, "the remote job is bound", func() (bool, error) {
				op, _ := opEvents(t, g, opID)
				return op.State == ledger.StateRunning, nil
			})
			for range 2 { // the second is answered alike, and records nothing
				_, err = taskwire.CancelTask(ctx, cs, task.ID)
				var werr *jsonrpc.Error
				switch era {
				case fixtures.EraExtension:
					if err != nil {
						t.Fatalf("tasks/cancel = %v; want the acknowledgement", err)
					}
					got, err := taskwire.GetTask(ctx, cs, task.ID)
					if err != nil || got.Status == taskwire.StatusCancelled || !strings.Contains(got.StatusMessage, "client_cancel: before_send") {
						t.Fatalf("task after a kept cancel = %+v, %v; want it going on, saying why", got, err)
					}
				case fixtures.EraLegacy:
					if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams ||
						!strings.Contains(werr.Message, "was not cancelled") || !strings.Contains(werr.Message, "client_cancel: before_send") {
						t.Fatalf("tasks/cancel = %v; want -32602 saying the policy keeps the job", err)
					}
					var data struct {
						Reason string `json:"reason"`
					}
					if json.Unmarshal(werr.Data, &data) != nil || data.Reason != "cancel_kept_by_policy" {
						t.Errorf("data %s; want reason cancel_kept_by_policy", werr.Data)
					}
				}
			}
			if done := awaitTask(t, cs, task.ID); done.Status != taskwire.StatusCompleted {
				t.Fatalf("task ended %s (%s); want completed", done.Status, done.StatusMessage)
			}
			testwait.Until(t, ctx, "the operation is reconciled", func() (bool, error) {
				_, evs := opEvents(t, g, opID)
				return countKind(evs, ledger.EventReconciled) > 0, nil
			})
			_, evs := opEvents(t, g, opID)
			if n, sent := countKind(evs, ledger.EventCancellationRequested), countKind(evs, ledger.EventCancelSent); n != 1 || sent != 0 {
				t.Errorf("%d cancellation_requested and %d cancel_sent events; want 1 and 0", n, sent)
			}
			r := receiptOf(t, g.store, opID)
			if c := r.Cancellation; r.State != string(ledger.StateCompleted) || c == nil || !c.CancellationRequested || c.KeptByPolicy != "before_send" {
				t.Errorf("receipt: state %s, cancellation %+v; want completed, the request recorded and kept by before_send", r.State, c)
			}
		})
	}
	for _, j := range g.sim.Jobs() {
		if j.Status != providersim.StatusSucceeded {
			t.Errorf("provider job %s is %s; want it run to its end", j.ID, j.Status)
		}
	}

	t.Run("before the send", func(t *testing.T) {
		cs := g.connect(t, fixtures.EraExtension)
		// run_matrix needs an approval: its task waits for one, unsent.
		task, _, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunMatrixCall("op-unsent", "x", 2), nil)
		if err != nil || task == nil {
			t.Fatalf("tools/call = %v, %v", task, err)
		}
		if _, err := taskwire.CancelTask(ctx, cs, task.ID); err != nil {
			t.Fatal(err)
		}
		got, err := taskwire.GetTask(ctx, cs, task.ID)
		if err != nil || got.Status != taskwire.StatusCancelled || !strings.Contains(got.StatusMessage, "before anything was sent") {
			t.Fatalf("task after a cancel before the send = %+v, %v; want cancelled, nothing sent", got, err)
		}
	})
}
