package mcpserver_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/secrets"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/taskwire"
)

// processGateway runs taskgate serve as a real child process (this test
// binary standing in for the command) in front of files at upstreamURL,
// so that it can be killed with SIGKILL: no shutdown of any kind runs.
func processGateway(t *testing.T, upstreamURL string) *fixtures.Harness {
	t.Helper()
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "taskgate.keys")
	if err := os.WriteFile(keyFile, []byte(secrets.NewKey()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h, err := fixtures.New(testCtx(t), &fixtures.Options{
		Dir: dir, Process: []string{os.Args[0]}, Env: []string{helperEnv + "=taskgate"},
		Config:     fixtures.ConfigOptions{SecretsKeyFile: keyFile},
		EditConfig: func(y string) string { return withFilesUpstream(y, upstreamURL) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	waitConnected(t, h)
	return h
}

// waitConnected waits until the gateway process reports itself ready, its
// upstreams connected: it answers /healthz as soon as it listens and
// connects them in the background, and a call before that is refused.
func waitConnected(t *testing.T, h *fixtures.Harness) {
	t.Helper()
	ready := strings.TrimSuffix(h.MCPURL(), "/mcp") + "/readyz"
	testwait.Until(t, testCtx(t), "the gateway process to be ready", func() (bool, error) {
		resp, err := http.Get(ready)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// killAndRestart ends the gateway process with SIGKILL and starts it again
// on the same ledger and address.
func killAndRestart(t *testing.T, h *fixtures.Harness) {
	t.Helper()
	if err := h.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(testCtx(t)); err != nil {
		t.Fatalf("restart the gateway: %v", err)
	}
	waitConnected(t, h)
}

// TestQuestionSurvivesSIGKILL: a gateway process killed while a
// 2026-07-28 upstream's question waits loses nothing the question needs:
// after the restart tasks/get still shows it, tasks/update answers it, and
// the operation completes with the provider's one job.
func TestQuestionSurvivesSIGKILL(t *testing.T) {
	up, upURL := newConfirmUpstream(t)
	h := processGateway(t, upURL)
	task := askedTask(t, connect(t, h, "acme", fixtures.EraExtension), "op-killed")
	killAndRestart(t, h)

	answerAfterRestart(t, connect(t, h, "acme", fixtures.EraExtension), up, task.ID, "the kill")
	if op := operationOf(t, h.Store, "op-killed"); op.SendCount != 2 {
		t.Fatalf("send count = %d; want the question's send and its continuation", op.SendCount)
	}
}

// TestElicitationLostOnSIGKILL: a 2025-11-25 upstream's question asked
// within the call dies with the gateway process that held the call, so
// after a SIGKILL and a restart the operation waits for a human with
// reason upstream_input_lost_on_restart, and nothing is sent again.
func TestElicitationLostOnSIGKILL(t *testing.T) {
	up, upURL := newElicitingUpstream(t)
	h := processGateway(t, upURL)
	cs := connect(t, h, "acme", fixtures.EraExtension)
	task, _, err := taskwire.CallToolAsTask(testCtx(t), cs, deleteCall("op-killed-in-call"), nil)
	if err != nil || task == nil {
		t.Fatalf("tools/call = %v, %v; want a task", task, err)
	}
	if asked := awaitTask(t, cs, task.ID); asked.Status != taskwire.StatusInputRequired {
		t.Fatalf("task = %s (%s), want input_required", asked.Status, asked.StatusMessage)
	}
	killAndRestart(t, h)

	testwait.Until(t, testCtx(t), "the operation to wait for a human", func() (bool, error) {
		op := operationOf(t, h.Store, "op-killed-in-call")
		return op.State == ledger.StateReview && op.ReviewReason == ledger.ReasonUpstreamInputLost, fmt.Errorf("state %s (%s): %s", op.State, op.ReviewReason, op.StatusMessage)
	})
	cs2 := connect(t, h, "acme", fixtures.EraExtension)
	if got, err := taskwire.GetTask(testCtx(t), cs2, task.ID); err != nil || got.Status != taskwire.StatusWorking || !strings.Contains(got.StatusMessage, ledger.ReasonUpstreamInputLost) {
		t.Fatalf("task after the restart = %+v, %v; want working, waiting for a human (%s)", got, err, ledger.ReasonUpstreamInputLost)
	}
	if jobs, _ := up.seen(); jobs != 0 {
		t.Fatalf("upstream jobs = %d, want 0", jobs)
	}
	if op := operationOf(t, h.Store, "op-killed-in-call"); op.SendCount != 1 {
		t.Fatalf("send count = %d, want 1: nothing re-sent", op.SendCount)
	}
}
