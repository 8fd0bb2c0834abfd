package console_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/secrets"
	"github.com/taskgate/taskgate/signingkeys"
	"github.com/taskgate/taskgate/sim/fixtures"
)

// screenshotsEnv names the directory TestScreenshots writes its images
// into; unset, the test does not run. ./console/screenshots sets it.
const screenshotsEnv = "TASKGATE_CONSOLE_SCREENSHOTS"

// TestScreenshots takes the README's pictures of the console from a real
// run: a real MCP call of a paid tool waits for approval, the approver
// signs in and sees it in the inbox, approves it, and the operation page
// shows the completed task and its receipt.
func TestScreenshots(t *testing.T) {
	dir := os.Getenv(screenshotsEnv)
	if dir == "" {
		t.Skip("SKIPPED: set " + screenshotsEnv + "=DIR (./console/screenshots does) to take the console's screenshots")
	}
	exe := chromiumPath(t)
	// The gateway has a receipt-signing key, so that the operation's
	// receipt is issued once it is final.
	keys := filepath.Join(t.TempDir(), "taskgate.keys")
	if _, err := secrets.CreateFile(keys); err != nil {
		t.Fatal(err)
	}
	h, err := fixtures.New(testCtx(t), &fixtures.Options{Config: fixtures.ConfigOptions{Approval: true, SecretsKeyFile: keys}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	ring, err := secrets.LoadFile(keys)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := signingkeys.Create(testCtx(t), h.Store, ring, time.Time{}); err != nil {
		t.Fatal(err)
	}
	waitingCall(t, h, "acme", "settlement-regression-842")
	waitingCallOf(t, h, "acme", fixtures.RunMatrixCall("nightly-matrix-17", "nightly", 4))
	list, err := h.Store.ApprovalRequestList(testCtx(t), &ledger.ApprovalRequestListParams{Tenant: "acme", Statuses: []ledger.ApprovalRequestStatus{ledger.RequestPending}})
	if err != nil || len(list) != 2 {
		t.Fatalf("pending requests = %+v, %v; want the suite's and the matrix's", list, err)
	}
	q := list[0]
	for _, r := range list {
		if r.OperationID == "settlement-regression-842" {
			q = r
		}
	}
	key, _ := approverKey(t, h, "acme")

	ctx, run := chromium(t, exe, chromedp.WindowSize(1280, 900))
	// shoot takes the viewport, or with full the whole page.
	shoot := func(name string, full bool) {
		t.Helper()
		step, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		capture := chromedp.CaptureScreenshot()
		if full {
			capture = chromedp.FullScreenshot(100)
		}
		png, err := chromedp.Run(step, capture)
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", filepath.Join(dir, name))
	}
	base := baseURL(h)
	request := fmt.Sprintf("#request-%d", q.ID)

	run("sign in as the approver", chromedp.Navigate(base+"/console/sign-in"), chromedp.WaitVisible(chromedp.CSS("#credential")),
		chromedp.SendKeys(chromedp.CSS("#credential"), key), chromedp.Submit(chromedp.CSS("#sign-in")),
		chromedp.WaitVisible(chromedp.CSS(request)))
	shoot("console-inbox.png", false)

	run("approve from the inbox", chromedp.SetValue(chromedp.CSS(request+" form.approve input[name=note]"), "settlement regression before the release"),
		chromedp.Click(chromedp.CSS(request+" form.approve button")), chromedp.WaitVisible(chromedp.CSS("#state")))
	testwait.Until(t, testCtx(t), "the operation page to show the task completed and its receipt issued", func() (bool, error) {
		step, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		state, err := chromedp.Run(step, chromedp.Evaluate[string](`(document.querySelector("#state") || {}).textContent || ""`))
		if err != nil {
			return false, nil // a reload is under way
		}
		receipt, err := chromedp.Run(step, chromedp.Evaluate[string](`(document.querySelector("#receipt") || {}).className || ""`))
		if err != nil {
			return false, nil
		}
		return state == "completed" && receipt == "issued", nil
	})
	shoot("console-operation.png", false)

	run("open the issued receipt", chromedp.Navigate(base+"/console/operations/settlement-regression-842/receipt"), chromedp.WaitVisible(chromedp.CSS("#issued")))
	check, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#check").textContent`))
	if err != nil || !strings.Contains(check, "the signature matches") {
		t.Fatalf("the receipt page's signature check reads %q, %v; want it to match", check, err)
	}
	shoot("console-receipt.png", true)
}
