package worker_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
)

// The provider is a stdio child of the gateway (taskgate provider-sim
// --stdio, its record in a state file), and it is killed with SIGKILL while
// the consequential call is in flight: it has recorded the job and
// withholds its answer. The supervisor starts it again over the same
// record; the worker looks the operation up there and attaches to the job
// rather than sending again — this provider ignores idempotency keys, so a
// blind re-send would start a second job — and the operation completes
// with one job and one charge.
func TestStdioUpstreamKilledDuringASend(t *testing.T) {
	const opID = "op-stdio-killed"
	ctx := testCtx(t, 90*time.Second)
	dir := t.TempDir()
	state := filepath.Join(dir, "provider.json")
	pidFile := filepath.Join(dir, "provider.pid")
	// The shell writes its process ID, which exec hands on to the provider.
	command := []string{"/bin/sh", "-c", `echo $$ > "$0" && exec "$@"`, pidFile,
		gatewayBinary, "provider-sim", "--stdio", "--state", state, "--job-duration", "2s",
		"--fault", "drop_response_after_accept", "--fault", "ignore_idempotency_key"}
	// The upstream timeout outlasts the restart, so that the withheld
	// answer is ended by the kill, and the lookup waits for the new child.
	g := startGateway(t, "", fixtures.ConfigOptions{Command: command, UpstreamTimeout: 30 * time.Second})
	logHistory(t, g.Store, opID)
	cs := g.connect(t, ctx, fixtures.EraExtension)
	startTask(t, ctx, cs, opID)

	testwait.Until(t, ctx, "the provider to record the job", func() (bool, error) {
		r, err := providersim.ReadRecord(state)
		return err == nil && len(r.Jobs) == 1, fmt.Errorf("provider record: %d jobs, error %v", len(r.Jobs), err)
	})
	first, err := childPID(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the provider (pid %d): %v", first, err)
	}
	testwait.Until(t, ctx, "the provider to be started again", func() (bool, error) {
		// A shell that is writing the file may leave it empty for a moment.
		pid, err := childPID(pidFile)
		return err == nil && pid != first, fmt.Errorf("the provider is pid %d (%v), the killed one %d", pid, err, first)
	})

	op := awaitOperation(t, ctx, g.Store, opID, endedOrReview)
	if op.State != ledger.StateCompleted {
		t.Fatalf("operation ended %s (%s, review reason %q), want completed", op.State, op.StatusMessage, op.ReviewReason)
	}
	if op.SendCount != 1 {
		t.Errorf("send count = %d, want 1: nothing was sent again", op.SendCount)
	}
	// The job runs on at the provider, or has just ended on a slow
	// machine: the lookup attaches to it or fetches its result.
	if got := lookups(t, ctx, g.Store, op); len(got) != 1 || (got[0][1] != "attach_to_existing_job" && got[0][1] != "fetch_result") {
		t.Errorf("lookups (answer, action) = %v, want one that attached to the job or fetched its result", got)
	}
	var r providersim.Record
	testwait.Until(t, ctx, "the provider's charge to be final", func() (bool, error) {
		var err error
		r, err = providersim.ReadRecord(state)
		return err == nil && len(r.Charges) == 1 && r.Charges[0].Status == providersim.ChargeFinal,
			fmt.Errorf("provider charges %+v, error %v", r.Charges, err)
	})
	if len(r.Jobs) != 1 || r.Jobs[0].IdempotencyKey != op.ProviderKey() || r.Jobs[0].Status != providersim.StatusSucceeded {
		t.Errorf("provider jobs = %+v, want one, succeeded, with key %q", r.Jobs, op.ProviderKey())
	}
	if got := gaugeOrCounter(t, g.d.Registry, "taskgate_upstream_restarts_total", "hosted_test"); got != 1 {
		t.Errorf("taskgate_upstream_restarts_total{upstream=hosted_test} = %v, want 1", got)
	}
	if got := gaugeOrCounter(t, g.d.Registry, "taskgate_upstream_connected", "hosted_test"); got != 1 {
		t.Errorf("taskgate_upstream_connected{upstream=hosted_test} = %v, want 1", got)
	}
}

// childPID reads the process ID the provider's shell wrote.
func childPID(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read the provider's pid: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("the provider's pid file holds %q: %w", b, err)
	}
	return pid, nil
}

// gaugeOrCounter is the value of metric name for an upstream in reg.
func gaugeOrCounter(t *testing.T, reg *prometheus.Registry, name, upstream string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "upstream" && l.GetValue() == upstream {
					return m.GetGauge().GetValue() + m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s for upstream %s", name, upstream)
	return 0
}
