package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/taskgate/taskgate/canon"
	"github.com/taskgate/taskgate/internal/pgtest"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/storetest"
)

// TestTwoProcessesOneOperation starts two OS processes that each submit the
// same (tenant, operation ID) from 32 goroutines at the same instant against
// one database: exactly one operation and one dispatch job may result.
func TestTwoProcessesOneOperation(t *testing.T) {
	url := pgtest.Schema(t)
	s := open(t, url, true)
	startAt := time.Now().Add(2 * time.Second).UnixNano()
	var wg sync.WaitGroup
	outs := make([][]byte, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperAcceptProcess$", "-test.v")
			cmd.Env = append(os.Environ(),
				"TASKGATE_HELPER_PROCESS=accept",
				"TASKGATE_HELPER_URL="+url,
				"TASKGATE_HELPER_START="+strconv.FormatInt(startAt, 10))
			outs[i], errs[i] = cmd.CombinedOutput()
		}()
	}
	wg.Wait()
	for i := range 2 {
		if errs[i] != nil {
			t.Fatalf("process %d: %v\n%s", i, errs[i], outs[i])
		}
	}
	ctx := context.Background()
	ops, err := s.OperationList(ctx, &ledger.OperationListParams{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 1 {
		t.Fatalf("operations = %d, want 1", len(ops))
	}
	as, err := s.AttemptList(ctx, ops[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != 64 {
		t.Fatalf("attempts = %d, want 64", len(as))
	}
	jc, err := s.NewJobClient(&river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := jc.JobList(ctx, river.NewJobListParams().First(100))
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs.Jobs) != 1 {
		t.Fatalf("dispatch jobs = %d, want 1", len(jobs.Jobs))
	}
}

// TestHelperAcceptProcess is the child of TestTwoProcessesOneOperation.
func TestHelperAcceptProcess(t *testing.T) {
	if os.Getenv("TASKGATE_HELPER_PROCESS") != "accept" {
		t.Skip("helper process for TestTwoProcessesOneOperation")
	}
	s := open(t, os.Getenv("TASKGATE_HELPER_URL"), false)
	startNanos, _ := strconv.ParseInt(os.Getenv("TASKGATE_HELPER_START"), 10, 64)
	args := json.RawMessage(`{"suite":"settlement","commit":"4be1c2"}`)
	fp, err := canon.Compute("hosted_test", "run_suite", args)
	if err != nil {
		t.Fatal(err)
	}
	// The two processes meet at an agreed instant, not on a condition:
	// what the test needs is that both submit at once. A process that
	// starts late only makes the race milder; the counts still hold.
	time.Sleep(time.Until(time.Unix(0, startNanos)))
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.Accept(context.Background(), &ledger.AcceptParams{
				Tenant: "acme", OperationID: "op-two-processes", Upstream: "hosted_test", Tool: "run_suite",
				Fingerprint: string(fp), Arguments: args, RequestID: ledger.NewRequestID(), TaskID: ledger.NewTaskID(),
				Enqueue: func(op *ledger.Operation) []river.InsertManyParams {
					return []river.InsertManyParams{{Args: storetest.ProbeArgs{OperationRef: op.ID}}}
				},
			})
			if err != nil {
				t.Error(err)
				return
			}
			fmt.Println("decision", res.Decision)
		}()
	}
	wg.Wait()
}
