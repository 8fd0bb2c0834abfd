package providersim

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/taskwire"
)

// taskEras pairs each protocol era with the task design it offers.
var taskEras = []struct {
	protocol string
	era      taskwire.Era
}{
	{eraModern, taskwire.EraExtension},
	{eraLegacy, taskwire.EraLegacy},
}

// connectTasks connects a client that uses tasks, in the given protocol era.
func connectTasks(t *testing.T, baseURL, protocol string, want taskwire.Era) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "providersim-task-test", Version: "1.0.0"}, nil)
	if err := taskwire.InstallClient(client); err != nil {
		t.Fatal(err)
	}
	transport := taskwire.WrapClientTransport(&mcp.StreamableClientTransport{Endpoint: baseURL + "/mcp"})
	cs, err := client.Connect(testCtx(t), transport, &mcp.ClientSessionOptions{ProtocolVersion: protocol})
	if err != nil {
		t.Fatalf("connecting in era %s: %v", protocol, err)
	}
	t.Cleanup(func() { cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != protocol {
		t.Fatalf("negotiated protocol %s, want %s", got, protocol)
	}
	if got := taskwire.ServerOffersTasks(cs); got != want {
		t.Fatalf("server offers tasks %s, want %s", got, want)
	}
	return cs
}

// startTask calls run_suite as a task and fails unless a task comes back.
func startTask(ctx context.Context, t *testing.T, cs *mcp.ClientSession, args RunSuiteArgs) *taskwire.Task {
	t.Helper()
	task, res, err := taskwire.CallToolAsTask(ctx, cs, &mcp.CallToolParams{Name: ToolRunSuite, Arguments: args}, nil)
	if err != nil {
		t.Fatalf("run_suite as a task: %v", err)
	}
	if task == nil {
		t.Fatalf("run_suite answered directly (%q), want a task", text(res))
	}
	return task
}

// taskOutcome waits for a task to end and returns its tool result, read the
// way the era provides it: inline in tasks/get, or from tasks/result.
func taskOutcome(ctx context.Context, t *testing.T, cs *mcp.ClientSession, era taskwire.Era, id string) (*taskwire.Task, *mcp.CallToolResult) {
	t.Helper()
	task, err := taskwire.AwaitTask(ctx, cs, id, 10*time.Millisecond)
	if err != nil {
		t.Fatalf("awaiting task %s: %v", id, err)
	}
	if era == taskwire.EraLegacy {
		res, err := taskwire.TaskResult(ctx, cs, id)
		if err != nil {
			t.Fatalf("tasks/result %s: %v", id, err)
		}
		return task, res
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(task.Result, &res); err != nil {
		t.Fatalf("inline result %s of task %s: %v", task.Result, id, err)
	}
	return task, &res
}

func TestRunSuiteAsTask(t *testing.T) {
	for _, tt := range taskEras {
		t.Run(tt.protocol, func(t *testing.T) {
			s, url := startHTTP(t, &Options{JobDuration: shortJob})
			cs := connectTasks(t, url, tt.protocol, tt.era)
			ctx := testCtx(t)
			args := RunSuiteArgs{Suite: "settlement-regression", IdempotencyKey: "op-task"}

			task := startTask(ctx, t, cs, args)
			if task.ID != "hosted-suite-9912" {
				t.Errorf("task ID = %s, want the job ID hosted-suite-9912", task.ID)
			}
			done, res := taskOutcome(ctx, t, cs, tt.era, task.ID)
			if done.Status != taskwire.StatusCompleted {
				t.Errorf("task status = %s, want completed", done.Status)
			}
			want := SuiteResult{JobID: "hosted-suite-9912", Status: StatusSucceeded, Suite: "settlement-regression", Passed: suiteTests, ChargeUSD: "17.84"}
			if got := structured[SuiteResult](t, res); got != want || res.IsError {
				t.Errorf("task result = %+v (isError %v), want %+v", got, res.IsError, want)
			}

			// The same key again names the same task; no second job starts.
			again := startTask(ctx, t, cs, args)
			if again.ID != task.ID {
				t.Errorf("repeated run_suite task = %s, want %s", again.ID, task.ID)
			}
			jobs := s.Jobs()
			if len(jobs) != 1 || jobs[0].Protocol != tt.protocol || jobs[0].KeySource != KeyFromArgument {
				t.Errorf("record = %+v, want one job from protocol %s keyed by the argument", jobs, tt.protocol)
			}
			if got, want := s.Totals(), (Totals{JobsStarted: 1, FinalCharges: 1, FinalChargeUSD: USD(17, 84)}); got != want {
				t.Errorf("Totals() = %+v, want %+v", got, want)
			}
		})
	}
}

func TestFailedJobAsTask(t *testing.T) {
	for _, tt := range taskEras {
		t.Run(tt.protocol, func(t *testing.T) {
			_, url := startHTTP(t, &Options{JobDuration: shortJob, Faults: Faults{FailJobs: true}})
			cs := connectTasks(t, url, tt.protocol, tt.era)
			ctx := testCtx(t)
			task := startTask(ctx, t, cs, RunSuiteArgs{Suite: "smoke"})
			done, res := taskOutcome(ctx, t, cs, tt.era, task.ID)
			// A tool result with isError is a completed task in the extension
			// and a failed one in 2025-11-25.
			wantStatus := taskwire.StatusCompleted
			if tt.era == taskwire.EraLegacy {
				wantStatus = taskwire.StatusFailed
			}
			if done.Status != wantStatus {
				t.Errorf("task status = %s, want %s", done.Status, wantStatus)
			}
			if got := structured[SuiteResult](t, res); !res.IsError || got.Status != StatusFailed || got.ChargeUSD != "0.00" {
				t.Errorf("task result = %+v (isError %v), want isError, failed, charge 0.00", got, res.IsError)
			}
		})
	}
}

func TestTaskProgressAndCancel(t *testing.T) {
	for _, tt := range taskEras {
		t.Run(tt.protocol, func(t *testing.T) {
			s, url := startHTTP(t, &Options{JobDuration: longJob})
			cs := connectTasks(t, url, tt.protocol, tt.era)
			ctx := testCtx(t)
			task := startTask(ctx, t, cs, RunSuiteArgs{Suite: "nightly"})
			testwait.Until(t, testCtx(t), "the job to run", func() (bool, error) { return jobWithStatus(s, task.ID, StatusRunning), nil })

			got, err := taskwire.GetTask(ctx, cs, task.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != taskwire.StatusWorking || !strings.Contains(got.StatusMessage, "running") || !strings.Contains(got.StatusMessage, "18.00 USD pending") {
				t.Errorf("tasks/get of a running job = %s %q, want working with the job's progress and pending charge", got.Status, got.StatusMessage)
			}
			if got.PollInterval <= 0 {
				t.Errorf("tasks/get pollInterval = %s, want a suggestion", got.PollInterval)
			}

			if _, err := taskwire.CancelTask(ctx, cs, task.ID); err != nil {
				t.Fatalf("tasks/cancel: %v", err)
			}
			after, err := taskwire.GetTask(ctx, cs, task.ID)
			if err != nil {
				t.Fatal(err)
			}
			if after.Status != taskwire.StatusCancelled {
				t.Errorf("task after tasks/cancel = %s, want cancelled", after.Status)
			}
			if charges := s.Charges(); !jobWithStatus(s, task.ID, StatusCancelled) || len(charges) != 1 || charges[0].Status != ChargeRefunded {
				t.Errorf("record = %+v %+v, want the job cancelled and its charge refunded", s.Jobs(), charges)
			}

			if _, err := taskwire.GetTask(ctx, cs, "hosted-suite-1"); err == nil {
				t.Error("tasks/get of an unknown task succeeded, want an error")
			}
		})
	}
}

func TestLegacyToolsListAdvertisesTaskSupport(t *testing.T) {
	_, url := startHTTP(t, nil)
	cs := connectTasks(t, url, eraLegacy, taskwire.EraLegacy)
	res, err := cs.ListTools(testCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		want := taskwire.TaskForbidden
		if tool.Name == ToolRunSuite {
			want = taskwire.TaskOptional
		}
		if got := taskwire.ToolTaskSupport(tool); got != want {
			t.Errorf("%s execution.taskSupport = %q, want %q", tool.Name, got, want)
		}
	}
}

func TestDroppedTaskResponseStillStartsTheJob(t *testing.T) {
	s, url := startHTTP(t, &Options{JobDuration: shortJob, Faults: Faults{DropResponseAfterAccept: 1}})
	cs := connectTasks(t, url, eraModern, taskwire.EraExtension)
	callCtx, cancel := context.WithTimeout(testCtx(t), 300*time.Millisecond)
	defer cancel()
	args := RunSuiteArgs{Suite: "smoke", IdempotencyKey: "op-lost-task"}
	_, _, err := taskwire.CallToolAsTask(callCtx, cs, &mcp.CallToolParams{Name: ToolRunSuite, Arguments: args}, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("run_suite as a task with a dropped response: error = %v, want the caller's deadline to expire", err)
	}
	if jobs := s.Jobs(); len(jobs) != 1 {
		t.Fatalf("record = %+v, want the job the lost call started", jobs)
	}
	task := startTask(testCtx(t), t, cs, args)
	if task.ID != "hosted-suite-9912" {
		t.Errorf("retry's task = %s, want the original hosted-suite-9912", task.ID)
	}
}

func TestTaskOverStdio(t *testing.T) {
	s := New(&Options{JobDuration: shortJob})
	t.Cleanup(func() { s.Close() })
	transport, served := serveStdio(t, s)

	client := mcp.NewClient(&mcp.Implementation{Name: "providersim-task-test", Version: "1.0.0"}, nil)
	if err := taskwire.InstallClient(client); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	cs, err := client.Connect(ctx, taskwire.WrapClientTransport(transport), nil)
	if err != nil {
		t.Fatal(err)
	}
	task := startTask(ctx, t, cs, RunSuiteArgs{Suite: "smoke"})
	done, res := taskOutcome(ctx, t, cs, taskwire.EraExtension, task.ID)
	if got := structured[SuiteResult](t, res); done.Status != taskwire.StatusCompleted || got.Status != StatusSucceeded || got.JobID != task.ID {
		t.Errorf("task over stdio = %s with %+v, want completed with %s succeeded", done.Status, got, task.ID)
	}
	cs.Close()
	served(ctx)
}
