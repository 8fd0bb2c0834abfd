package console_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/taskwire"
)

// chromiumPath finds a Chromium to drive, or skips the test saying why.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("SKIPPED: no chromium binary on PATH; the browser test needs one (apt-get install chromium; .ci/run installs it)")
	return ""
}

// consoleLog collects what the page wrote to the browser's console, and
// which of it came while a refused request was expected.
type consoleLog struct {
	mu sync.Mutex
	// refusing is set while the test makes the console refuse something
	// on purpose: the browser logs the refused request's status as a
	// network error, which is the point of that step.
	refusing bool
	entries  []string
}

func (l *consoleLog) listen(ev any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		l.entries = append(l.entries, fmt.Sprintf("console.%s called", ev.Type))
	case *runtime.EventExceptionThrown:
		l.entries = append(l.entries, "exception: "+ev.ExceptionDetails.Text)
	case *cdplog.EventEntryAdded:
		if l.refusing && ev.Entry.Source == cdplog.EntrySourceNetwork {
			return
		}
		l.entries = append(l.entries, fmt.Sprintf("%s %s: %s (%s)", ev.Entry.Level, ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
	}
}

func (l *consoleLog) expectRefusal(on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refusing = on
}

func (l *consoleLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.entries...)
}

// The approver's whole path in a real Chromium: a real MCP call raises an
// approval request; an agent's key cannot sign in; the approver signs in,
// a form stripped of its CSRF token is refused, another tenant's operation
// is not found, the approval is given from the inbox, the operation page
// reloads itself until the task completes and links to the receipt's page,
// which names the approver; and no page wrote to the console.
func TestBrowserApproveFromInbox(t *testing.T) {
	exe := chromiumPath(t)
	h := harness(t)
	cs, task := waitingCall(t, h, "acme", "op-browser")
	waitingCall(t, h, "globex", "op-globex")
	q := pendingRequest(t, h, "acme")
	key, k := approverKey(t, h, "acme")
	agent, err := h.Key(testCtx(t), "acme")
	if err != nil {
		t.Fatal(err)
	}

	alloc, cancel := chromedp.NewExecAllocator(testCtx(t), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.Flag("disable-dev-shm-usage", true))...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	var logs consoleLog
	if err := chromedp.Listen(ctx, logs.listen); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		step, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if err := chromedp.Do(step, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	read := func(what, sel string) string {
		t.Helper()
		step, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		text, err := chromedp.Run(step, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return text
	}
	base := baseURL(h)

	run("open the console", chromedp.Navigate(base+"/console/inbox"), chromedp.WaitVisible(chromedp.CSS("#sign-in")))

	logs.expectRefusal(true)
	run("sign in with an agent key", chromedp.SendKeys(chromedp.CSS("#credential"), agent), chromedp.Submit(chromedp.CSS("#sign-in")),
		chromedp.WaitVisible(chromedp.CSS("#error")))
	text := read("read the error", "#error")
	if !strings.Contains(text, "the console is for approvers") {
		t.Fatalf("agent sign-in said %q", text)
	}
	logs.expectRefusal(false)

	request := fmt.Sprintf("#request-%d", q.ID)
	run("sign in as the approver", chromedp.Navigate(base+"/console/sign-in"), chromedp.WaitVisible(chromedp.CSS("#credential")),
		chromedp.SendKeys(chromedp.CSS("#credential"), key), chromedp.Submit(chromedp.CSS("#sign-in")),
		chromedp.WaitVisible(chromedp.CSS(request)))
	text = read("read the request", request)
	if !strings.Contains(text, fixtures.RunSuiteTool) || !strings.Contains(text, "op-browser") || !strings.Contains(text, q.Estimate.String()) {
		t.Fatalf("the inbox shows the request as %q", text)
	}

	logs.expectRefusal(true)
	run("approve with the CSRF token removed",
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).remove()`, request+" form.approve input[name=csrf]")),
		chromedp.Click(chromedp.CSS(request+" form.approve button")),
		chromedp.WaitVisible(chromedp.CSS("#error")))
	text = read("read the error", "#error")
	if !strings.Contains(text, "CSRF") {
		t.Fatalf("a form without its CSRF token said %q", text)
	}
	if n := len(h.Sim.Jobs()); n != 0 {
		t.Fatalf("provider jobs after the refused form = %d, want 0", n)
	}
	run("open another tenant's operation", chromedp.Navigate(base+"/console/operations/op-globex"),
		chromedp.WaitVisible(chromedp.CSS("#error")))
	text = read("read the error", "#error")
	if !strings.Contains(text, `no operation or task "op-globex"`) {
		t.Fatalf("another tenant's operation said %q", text)
	}
	logs.expectRefusal(false)

	run("approve from the inbox", chromedp.Navigate(base+"/console/inbox"), chromedp.WaitVisible(chromedp.CSS(request)),
		chromedp.SetValue(chromedp.CSS(request+" form.approve input[name=note]"), "approved in the browser"),
		chromedp.Click(chromedp.CSS(request+" form.approve button")), chromedp.WaitVisible(chromedp.CSS("#state")))
	// The page reloads itself while the operation runs; nothing here
	// navigates again.
	testwait.Until(t, testCtx(t), "the operation page to show the task completed", func() (bool, error) {
		step, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		state, err := chromedp.Run(step, chromedp.Evaluate[string](`(document.querySelector("#state") || {}).textContent || ""`))
		if err != nil {
			// A reload is under way; the next look sees the new page.
			return false, nil
		}
		return state == "completed", nil
	})
	run("open the receipt", chromedp.Click(chromedp.CSS("#receipt a")), chromedp.WaitVisible(chromedp.CSS("#figures")))
	text = read("read the receipt", "main")
	credential := fmt.Sprintf("api_key:%d", k.ID)
	if !strings.Contains(text, "op-browser") || !strings.Contains(text, credential) {
		t.Fatalf("the receipt on the page lacks the operation or the approver %s:\n%s", credential, text)
	}
	if done, err := taskwire.GetTask(testCtx(t), cs, task.ID); err != nil || done.Status != taskwire.StatusCompleted {
		t.Fatalf("the client's task = %+v, %v; want completed", done, err)
	}
	if n := len(h.Sim.Jobs()); n != 1 {
		t.Fatalf("provider jobs = %d, want 1", n)
	}
	if entries := logs.all(); len(entries) > 0 {
		t.Errorf("the pages wrote to the browser's console:\n%s", strings.Join(entries, "\n"))
	}
}

// chromium starts Chromium at exe, with opts such as a window size, for t,
// and returns its context, ended when t ends, and a runner of steps that
// fails t naming the step. The browser lives as long as the context of its
// first action, so it is started here on that context, not on a step's.
func chromium(t *testing.T, exe string, opts ...chromedp.ExecAllocatorOption) (context.Context, func(what string, actions ...chromedp.Action[chromedp.Void])) {
	t.Helper()
	alloc, cancelAlloc := chromedp.NewExecAllocator(testCtx(t), append(append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.Flag("disable-dev-shm-usage", true)), opts...)...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		step, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if err := chromedp.Do(step, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	return ctx, run
}
