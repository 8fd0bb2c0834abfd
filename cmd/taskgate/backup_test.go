package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/dburl"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/reconcile"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
	"github.com/taskgate/taskgate/taskwire"
)

// A SQLite gateway process serves three calls whose jobs are running at
// the provider when `taskgate backup` copies its ledger. The gateway then
// dies (SIGKILL). A plain copy of the backup in a new directory, served by
// a new gateway process, finishes the three operations: each one's task
// completes, the provider holds three jobs, not more, each operation was
// sent once, its receipt counts one job and no duplicate, and `taskgate
// verify` finds every hash chain whole.
func TestBackupOfALiveGatewayRestores(t *testing.T) {
	ctx := testCtx(t, 3*time.Minute)
	h, err := fixtures.New(ctx, &fixtures.Options{Process: []string{gatewayBinary}, Sim: providersim.Options{JobDuration: 4 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	key, err := h.Key(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := fixtures.Dial(ctx, h.MCPURL(), key, fixtures.EraExtension, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"backup-op-1", "backup-op-2", "backup-op-3"}
	tasks := map[string]string{}
	for _, id := range ids {
		task, _, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall(id, nil), nil)
		if err != nil || task == nil {
			t.Fatalf("call %s = %+v, %v; want a task", id, task, err)
		}
		tasks[id] = task.ID
	}
	cs.Close()
	testwait.Until(t, ctx, "the three operations to be sent and their jobs to run at the provider", func() (bool, error) {
		for _, id := range ids {
			op, err := h.Store.OperationGet(ctx, &ledger.OperationGetParams{Tenant: "acme", OperationID: id})
			if err != nil || op.SendCount == 0 {
				return false, err
			}
		}
		return len(h.Sim.Jobs()) == len(ids), nil
	})

	live := filepath.Join(filepath.Dir(h.ConfigPath), "taskgate.db")
	out := filepath.Join(t.TempDir(), "taskgate.backup")
	if b, err := exec.CommandContext(ctx, gatewayBinary, "backup", "--db", "sqlite:"+live, "--out", out).CombinedOutput(); err != nil ||
		!strings.Contains(string(b), "integrity ok") {
		t.Fatalf("taskgate backup: %v\n%s", err, b)
	}
	if err := h.Kill(); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	restored := filepath.Join(dir, "taskgate.db")
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(restored, data, 0o600); err != nil {
		t.Fatal(err)
	}
	db := "sqlite:" + restored
	s, err := dburl.Open(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, id := range ids {
		op, err := s.OperationGet(ctx, &ledger.OperationGetParams{Tenant: "acme", OperationID: id})
		if err != nil {
			t.Fatal(err)
		}
		if op.State.Terminal() {
			t.Fatalf("operation %s is %s in the backup; the backup was to be taken while it ran", id, op.State)
		}
	}

	addr := freeAddr(t)
	config := filepath.Join(dir, "taskgate.yaml")
	if err := os.WriteFile(config, []byte(fixtures.ConfigYAML(h.SimURL, addr, db, fixtures.ConfigOptions{})), 0o600); err != nil {
		t.Fatal(err)
	}
	startGateway(t, config)
	testwait.Until(t, ctx, "the restored gateway to answer", func() (bool, error) {
		code, err := getStatus("http://" + addr + "/healthz")
		return code == 200, err
	})
	cs, err = fixtures.Dial(ctx, "http://"+addr+"/mcp", key, fixtures.EraExtension, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, id := range ids {
		done, err := taskwire.AwaitTask(ctx, cs, tasks[id], 100*time.Millisecond)
		if err != nil {
			t.Fatalf("task of %s on the restored gateway: %v", id, err)
		}
		if done.Status != taskwire.StatusCompleted {
			t.Fatalf("task of %s ended %s on the restored gateway, want completed", id, done.Status)
		}
	}
	if jobs := h.Sim.Jobs(); len(jobs) != len(ids) {
		t.Fatalf("the provider holds %d jobs, want %d: the restored gateway sent again", len(jobs), len(ids))
	}
	for _, id := range ids {
		var (
			op *ledger.Operation
			r  *receipt.Receipt
		)
		testwait.Until(t, ctx, "the receipt of "+id+" to be reconciled", func() (bool, error) {
			if op, err = s.OperationGet(ctx, &ledger.OperationGetParams{Tenant: "acme", OperationID: id}); err != nil {
				return false, err
			}
			in, err := receipt.Load(ctx, s, op, nil)
			if err != nil {
				return false, err
			}
			r = receipt.Build(in)
			return r.ReconciliationStatus == receipt.ReconciliationStatus(reconcile.Complete), nil
		})
		if op.SendCount != 1 || r.ObservedRemoteJobs != 1 || r.DuplicateJobs != 0 {
			t.Fatalf("%s: sent %d times, receipt with %d remote jobs and %d duplicates; want 1, 1, 0", id, op.SendCount, r.ObservedRemoteJobs, r.DuplicateJobs)
		}
	}
	b, err := exec.CommandContext(ctx, gatewayBinary, "verify", "--db", db).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(b), "every hash chain in ledger") || !strings.Contains(string(b), fmt.Sprintf("holds: %d operations", len(ids))) {
		t.Fatalf("taskgate verify of the restored ledger: %v\n%s", err, b)
	}
}
