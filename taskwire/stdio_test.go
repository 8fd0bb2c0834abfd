package taskwire

import (
	"context"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// connectStdio serves a taskwire server over a pair of in-memory pipes and
// connects a client with the client shim; version pins the protocol ("" lets
// the SDK negotiate).
func connectStdio(t *testing.T, host Host, version string) *mcp.ClientSession {
	t.Helper()
	server := newTestServer(t, host)
	clientIn, serverOut := io.Pipe()
	serverIn, clientOut := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- server.Run(ctx, NewStdioTransport(serverIn, serverOut)) }()

	client := mcp.NewClient(&mcp.Implementation{Name: "taskwire-stdio-client", Version: "v0.0.1"}, nil)
	if err := InstallClient(client); err != nil {
		t.Fatal(err)
	}
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := client.Connect(testContext(t), WrapClientTransport(&mcp.IOTransport{Reader: clientIn, Writer: clientOut}), opts)
	if err != nil {
		cancel()
		t.Fatalf("connect over stdio: %v", err)
	}
	t.Cleanup(func() {
		cs.Close()
		select {
		case <-served:
		case <-time.After(5 * time.Second):
			t.Error("stdio server did not stop after the client closed")
		}
		cancel()
	})
	return cs
}

func TestStdioExtensionEra(t *testing.T) {
	host := newTestHost()
	cs := connectStdio(t, host, "")
	ctx := testContext(t)
	if got := ServerOffersTasks(cs); got != EraExtension {
		t.Fatalf("ServerOffersTasks = %v on protocol %q, want extension", got, cs.InitializeResult().ProtocolVersion)
	}

	p := callParams("slow", nil)
	p.Meta = mcp.Meta{MetaIdempotencyKey: "op-stdio-ext"}
	task, res, err := CallToolAsTask(ctx, cs, p, nil)
	if err != nil || task == nil {
		t.Fatalf("CallToolAsTask = %v, %+v, %v; want a task", task, res, err)
	}
	host.release(task.ID)
	done, err := AwaitTask(ctx, cs, task.ID, 5*time.Millisecond)
	if err != nil || done.Status != StatusCompleted || resultText(t, done.Result) != "slow done" {
		t.Fatalf("AwaitTask = %+v, %v; want completed with the result inlined", done, err)
	}
	c := host.callsTo("slow")[0].Caller
	if c.Era != EraExtension || c.IdempotencyKey != "op-stdio-ext" || c.RequestID == "" {
		t.Errorf("caller = era %v, key %q, request ID %q; want extension, op-stdio-ext and the JSON-RPC ID", c.Era, c.IdempotencyKey, c.RequestID)
	}
	if c.TokenInfo != nil || c.Header != nil {
		t.Errorf("caller over stdio has token %v and header %v, want neither", c.TokenInfo, c.Header)
	}
	if _, err := CancelTask(ctx, cs, task.ID); err != nil {
		t.Errorf("CancelTask of a completed task = %v, want an acknowledgement", err)
	}
}

func TestStdioLegacyEra(t *testing.T) {
	host := newTestHost()
	cs := connectStdio(t, host, protocolLegacy)
	ctx := testContext(t)
	if got := ServerOffersTasks(cs); got != EraLegacy {
		t.Fatalf("ServerOffersTasks = %v, want legacy", got)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if tool.Name == "needs_task" && ToolTaskSupport(tool) != TaskRequired {
			t.Errorf("needs_task support = %q, want required", ToolTaskSupport(tool))
		}
	}

	ttl := 2 * time.Minute
	p := callParams("needs_task", nil)
	p.Meta = mcp.Meta{MetaIdempotencyKey: "op-stdio-legacy"}
	task, res, err := CallToolAsTask(ctx, cs, p, &ttl)
	if err != nil || task == nil {
		t.Fatalf("CallToolAsTask = %v, %+v, %v; want a task", task, res, err)
	}
	if task.TTL == nil || *task.TTL != ttl {
		t.Errorf("task ttl = %v, want %v", task.TTL, ttl)
	}
	host.release(task.ID)
	result, err := TaskResult(ctx, cs, task.ID)
	if err != nil || contentText(t, result) != "slow done" {
		t.Fatalf("TaskResult = %+v, %v", result, err)
	}
	c := host.callsTo("needs_task")[0].Caller
	if c.Era != EraLegacy || c.IdempotencyKey != "op-stdio-legacy" || c.RequestedTTL == nil || *c.RequestedTTL != ttl {
		t.Errorf("caller = era %v, key %q, ttl %v; want legacy, op-stdio-legacy, %v", c.Era, c.IdempotencyKey, c.RequestedTTL, ttl)
	}
	tasks, _, err := ListTasks(ctx, cs, "")
	if err != nil || len(tasks) != 1 || tasks[0].ID != task.ID || tasks[0].Status != StatusCompleted {
		t.Errorf("ListTasks = %+v, %v; want the one completed task", tasks, err)
	}
}

const childServerEnv = "TASKWIRE_TEST_STDIO_SERVER"

// TestStdioChildProcess runs the server in a child process (this test binary
// re-executed) on its real stdin and stdout, and talks to it through
// mcp.CommandTransport.
func TestStdioChildProcess(t *testing.T) {
	if os.Getenv(childServerEnv) == "1" {
		server := newTestServer(t, newTestHost())
		err := server.Run(context.Background(), NewStdioTransport(os.Stdin, os.Stdout))
		if err != nil {
			os.Exit(1)
		}
		// Exit before the test framework writes to stdout.
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestStdioChildProcess$")
	// atexit_sleep_ms=0 spares a race-enabled child the detector's exit delay.
	cmd.Env = append(os.Environ(), childServerEnv+"=1", "GORACE=atexit_sleep_ms=0")
	cmd.Stderr = os.Stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "taskwire-child-client", Version: "v0.0.1"}, nil)
	if err := InstallClient(client); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	cs, err := client.Connect(ctx, WrapClientTransport(&mcp.CommandTransport{Command: cmd}), nil)
	if err != nil {
		t.Fatalf("connect to the child server: %v", err)
	}
	defer func() {
		if err := cs.Close(); err != nil {
			t.Errorf("closing the child session: %v", err)
		}
	}()
	task, res, err := CallToolAsTask(ctx, cs, callParams("quick", nil), nil)
	if err != nil || task == nil {
		t.Fatalf("CallToolAsTask = %v, %+v, %v; want a task", task, res, err)
	}
	done, err := AwaitTask(ctx, cs, task.ID, 5*time.Millisecond)
	if err != nil || done.Status != StatusCompleted || resultText(t, done.Result) != "slow done" {
		t.Fatalf("AwaitTask = %+v, %v; want completed", done, err)
	}
}
