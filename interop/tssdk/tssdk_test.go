package tssdk

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/gatewaybin"
	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
)

// EnvNodeModules names the environment variable that holds the
// node_modules directory with the pinned TypeScript SDK.
const EnvNodeModules = "TASKGATE_INTEROP_NODE_MODULES"

// tenant is the tenant of the client's key.
const tenant = "acme"

// binaries are what the scenarios run; empty when EnvNodeModules is unset.
var binaries struct{ nodeModules, taskgate string }

func TestMain(m *testing.M) {
	binaries.nodeModules = os.Getenv(EnvNodeModules)
	if binaries.nodeModules == "" {
		os.Exit(m.Run())
	}
	binary, remove, err := gatewaybin.Build("../../cmd/taskgate", "taskgate-interop-tssdk-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binaries.taskgate = binary
	code := m.Run()
	remove()
	os.Exit(code)
}

// stage starts a gateway process in front of a provider whose jobs take
// job, and returns it with the tenant's key.
func stage(t *testing.T, ctx context.Context, job time.Duration) (*fixtures.Harness, string) {
	t.Helper()
	if binaries.nodeModules == "" {
		t.Skipf("SKIPPED: %s is not set; `make interop` installs the TypeScript SDK and runs these tests", EnvNodeModules)
	}
	h, err := fixtures.New(ctx, &fixtures.Options{Process: []string{binaries.taskgate}, Sim: providersim.Options{JobDuration: job}})
	if err != nil {
		t.Fatalf("start the gateway and the provider: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("taskgate serve's output:\n%s", h.Output())
		}
		h.Close()
	})
	key, err := h.Key(ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	return h, key
}

// message is one line client.mjs prints.
type message struct {
	Type            string          `json:"type"`
	ProtocolVersion string          `json:"protocolVersion"`
	TaskID          string          `json:"taskId"`
	Status          string          `json:"status"`
	Result          json.RawMessage `json:"result"`
	Error           string          `json:"error"`
	// TTL is the task's ttl as the SDK parsed it: absent, null or a
	// number of milliseconds.
	TTL    json.RawMessage `json:"ttl"`
	Answer *struct {
		Status        string          `json:"status"`
		StatusMessage string          `json:"statusMessage"`
		TTL           json.RawMessage `json:"ttl"`
	} `json:"answer"`
	Tools []struct {
		Name        string `json:"name"`
		TaskSupport string `json:"taskSupport"`
	} `json:"tools"`
}

// call runs client.mjs to its end: run_suite with opID; it returns the
// messages printed.
func call(t *testing.T, ctx context.Context, h *fixtures.Harness, key, opID string) []message {
	t.Helper()
	return start(t, ctx, h, key, opID, false).wait(t)
}

// client is a running client.mjs.
type client struct {
	cmd            *exec.Cmd
	stdin          io.WriteCloser
	stdout, stderr bytes.Buffer
}

// start starts client.mjs calling run_suite with opID; with cancel, it
// cancels the task it creates on the cue of [client.cancel].
func start(t *testing.T, ctx context.Context, h *fixtures.Harness, key, opID string, cancel bool) *client {
	t.Helper()
	dir := t.TempDir()
	script, err := os.ReadFile("client.mjs")
	if err != nil {
		t.Fatal(err)
	}
	// Node finds the SDK in the node_modules beside the script.
	if err := os.WriteFile(filepath.Join(dir, "client.mjs"), script, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(binaries.nodeModules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(map[string]any{"suite": "settlement", "operation_id": opID})
	argv := []string{filepath.Join(dir, "client.mjs"), h.MCPURL(), key, "hosted_test.run_suite", string(args)}
	if cancel {
		argv = append(argv, "cancel")
	}
	c := &client{cmd: exec.CommandContext(ctx, "node", argv...)}
	c.cmd.Dir = dir
	c.cmd.Stdout, c.cmd.Stderr = &c.stdout, &c.stderr
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start node client.mjs: %v", err)
	}
	return c
}

// cancel tells the client to cancel its task.
func (c *client) cancel(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(c.stdin, "cancel\n"); err != nil {
		t.Fatal(err)
	}
}

// wait waits for the client to end and returns the messages it printed.
func (c *client) wait(t *testing.T) []message {
	t.Helper()
	c.stdin.Close()
	err := c.cmd.Wait()
	t.Logf("client.mjs printed:\n%s%s", c.stdout.String(), c.stderr.String())
	if err != nil {
		t.Fatalf("node client.mjs: %v", err)
	}
	var out []message
	sc := bufio.NewScanner(&c.stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("client.mjs printed %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// find returns the first message of type typ.
func find(t *testing.T, msgs []message, typ string) message {
	t.Helper()
	for _, m := range msgs {
		if m.Type == typ {
			return m
		}
	}
	t.Fatalf("client.mjs printed no %s message", typ)
	return message{}
}

// receiptOf builds the operation's receipt from the ledger.
func receiptOf(t *testing.T, ctx context.Context, h *fixtures.Harness, opID string) *receipt.Receipt {
	t.Helper()
	op, err := h.Store.OperationGet(ctx, &ledger.OperationGetParams{Tenant: tenant, OperationID: opID})
	if err != nil {
		t.Fatalf("load operation %s: %v", opID, err)
	}
	in, err := receipt.Load(ctx, h.Store, op, nil)
	if err != nil {
		t.Fatalf("load the receipt of %s: %v", opID, err)
	}
	return receipt.Build(in)
}

// jobsEnded waits until the provider has n jobs, every one ended.
func jobsEnded(t *testing.T, ctx context.Context, sim *providersim.Sim, n int) {
	t.Helper()
	testwait.Until(t, ctx, fmt.Sprintf("the provider to have %d jobs, all ended", n), func() (bool, error) {
		jobs := sim.Jobs()
		if len(jobs) != n {
			return false, fmt.Errorf("%d jobs", len(jobs))
		}
		for _, j := range jobs {
			if !j.Status.Terminal() {
				return false, fmt.Errorf("job %s is %s", j.ID, j.Status)
			}
		}
		return true, nil
	})
}

// The SDK's task flow: run_suite is offered as a task, the call creates
// one, the SDK polls it and gets the job's result. Called again with the
// same operation ID, it gets the same result and the provider still has
// one job.
func TestTypeScriptSDKTaskCompletes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, key := stage(t, ctx, 2*time.Second)
	const opID = "ts-task"
	for attempt := 1; attempt <= 2; attempt++ {
		msgs := call(t, ctx, h, key, opID)
		if v := find(t, msgs, "connected").ProtocolVersion; v != "2025-11-25" {
			t.Errorf("the SDK negotiated %q; want 2025-11-25", v)
		}
		offered := false
		for _, tool := range find(t, msgs, "tools").Tools {
			offered = offered || tool.Name == "hosted_test.run_suite" && tool.TaskSupport != ""
		}
		if !offered {
			t.Fatalf("run_suite is not offered as a task: %+v", find(t, msgs, "tools").Tools)
		}
		if find(t, msgs, "taskCreated").TaskID == "" {
			t.Fatal("the task has no ID")
		}
		if res := find(t, msgs, "result").Result; !strings.Contains(string(res), `"status":"succeeded"`) {
			t.Fatalf("attempt %d: the result is %s; want the job's", attempt, res)
		}
	}
	jobsEnded(t, ctx, h.Sim, 1)
	if tot := h.Sim.Totals(); tot.JobsStarted != 1 || tot.FinalChargeUSD != providersim.DefaultFinalCharge {
		t.Errorf("provider totals = %+v; want 1 job, %s", tot, providersim.DefaultFinalCharge)
	}
	var r *receipt.Receipt
	testwait.Until(t, ctx, "the receipt to show the final charge", func() (bool, error) {
		r = receiptOf(t, ctx, h, opID)
		return r.FinalCostUSD.String() == "17.84", fmt.Errorf("final cost %s", r.FinalCostUSD)
	})
	if r.State != "completed" || r.ObservedRemoteJobs != 1 || r.Attempts != 2 || r.AttachedAttempts != 1 {
		t.Errorf("receipt: state %s, %d remote jobs, %d attempts (%d attached); want completed, 1, 2 (1 attached)",
			r.State, r.ObservedRemoteJobs, r.Attempts, r.AttachedAttempts)
	}
}

// The SDK cancels the task it created while the provider's job runs:
// taskgate cancels the job, whose charge is refunded.
func TestTypeScriptSDKTaskCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, key := stage(t, ctx, 30*time.Second)
	const opID = "ts-cancel"
	c := start(t, ctx, h, key, opID, true)
	testwait.Until(t, ctx, "the provider's job to run", func() (bool, error) {
		jobs := h.Sim.Jobs()
		return len(jobs) == 1 && jobs[0].Status == providersim.StatusRunning, fmt.Errorf("jobs %+v", jobs)
	})
	c.cancel(t)
	msgs := c.wait(t)
	// A running task's retention is unlimited (ttl null), not a number
	// that grows on every poll; once cancelled its ttl is fixed.
	for _, m := range msgs {
		if (m.Type == "taskCreated" || m.Type == "taskStatus") && m.Status == "working" && string(m.TTL) != "null" {
			t.Errorf("the SDK saw a working task with ttl %s; want null", m.TTL)
		}
	}
	answer, after := find(t, msgs, "cancelled").Answer, find(t, msgs, "afterCancel").Answer
	if answer == nil || after == nil || answer.Status != "cancelled" {
		t.Fatalf("tasks/cancel answered %+v, tasks/get then %+v; want the task cancelled", answer, after)
	}
	if string(answer.TTL) != string(after.TTL) || string(answer.TTL) == "null" {
		t.Errorf("the cancelled task's ttl is %s, then %s; want one fixed number", answer.TTL, after.TTL)
	}
	jobsEnded(t, ctx, h.Sim, 1)
	job := h.Sim.Jobs()[0]
	if job.Status != providersim.StatusCancelled {
		t.Fatalf("the provider's job is %s; want cancelled", job.Status)
	}
	if tot := h.Sim.Totals(); tot.FinalChargeUSD != 0 {
		t.Errorf("provider totals = %+v; want nothing charged", tot)
	}
	testwait.Until(t, ctx, "the receipt to show the operation cancelled", func() (bool, error) {
		r := receiptOf(t, ctx, h, opID)
		return r.State == "cancelled" && r.FinalCostUSD.String() == "0.00", fmt.Errorf("state %s, final cost %s", r.State, r.FinalCostUSD)
	})
	// Once the cancel was taken, the status says what came of it.
	var msg string
	testwait.Until(t, ctx, "the task's status to say what came of the cancellation", func() (bool, error) {
		op, err := h.Store.OperationGet(ctx, &ledger.OperationGetParams{Tenant: tenant, OperationID: opID})
		if err != nil {
			return false, err
		}
		msg = op.StatusMessage
		return strings.Contains(msg, "the provider stopped job "+string(job.ID)), fmt.Errorf("status %q", msg)
	})
	if strings.Contains(msg, "being asked to stop") || !strings.Contains(msg, "effect was reversed") {
		t.Errorf("the task's status is %q; want what came of the cancellation, not that the provider is being asked", msg)
	}
}
