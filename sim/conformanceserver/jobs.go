package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// jobStatus is a remote job's status as the contract tools report it.
type jobStatus string

const (
	jobRunning   jobStatus = "running"
	jobCompleted jobStatus = "completed" // ran to a tool result, an isError one too
	jobFailed    jobStatus = "failed"    // ended in a JSON-RPC error
	jobCancelled jobStatus = "cancelled"
)

// lookupNotFound is lookup_job's status for a key without a job.
const lookupNotFound = "not_found"

// job is one remote job.
type job struct {
	id     string
	key    string
	tool   string
	status jobStatus
	result *mcp.CallToolResult
	err    *jsonrpc.Error
	// stop is closed by cancel_job; done when the job has ended.
	stop chan struct{}
	done chan struct{}
}

// work is what a job does; it returns when finished or when stop closes,
// and reports which by its answer.
type work func(stop <-chan struct{}) (res *mcp.CallToolResult, err *jsonrpc.Error, cancelled bool)

// jobs holds every remote job of the process.
type jobs struct {
	mu    sync.Mutex
	next  int
	byID  map[string]*job
	byKey map[string][]*job
}

func newJobs() *jobs {
	return &jobs{byID: map[string]*job{}, byKey: map[string][]*job{}}
}

// start runs w as a new job of tool, unless key already has a job: then
// that job is returned and nothing new runs. The key is recorded in the
// same step that creates the job, so a lookup right after finds it.
func (js *jobs) start(tool, key string, w work) *job {
	js.mu.Lock()
	defer js.mu.Unlock()
	if existing := js.byKey[key]; key != "" && len(existing) > 0 {
		return existing[0]
	}
	js.next++
	j := &job{
		id: fmt.Sprintf("%s-%d", tool, js.next), key: key, tool: tool, status: jobRunning,
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	js.byID[j.id] = j
	if key != "" {
		js.byKey[key] = append(js.byKey[key], j)
	}
	go js.run(j, w)
	return j
}

func (js *jobs) run(j *job, w work) {
	res, rpcErr, cancelled := w(j.stop)
	js.mu.Lock()
	defer js.mu.Unlock()
	defer close(j.done)
	switch {
	case cancelled || j.status == jobCancelled:
		j.status = jobCancelled
		j.result = textResult(true, fmt.Sprintf("job %s was cancelled before it finished", j.id))
	case rpcErr != nil:
		j.status, j.err = jobFailed, rpcErr
	default:
		j.status, j.result = jobCompleted, res
	}
}

// wait returns j's answer once it has ended, or ctx's error.
func (js *jobs) wait(ctx context.Context, j *job) (*mcp.CallToolResult, error) {
	select {
	case <-j.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	js.mu.Lock()
	defer js.mu.Unlock()
	if j.err != nil {
		return nil, j.err
	}
	return j.result, nil
}

// lookup returns key's jobs, oldest first.
func (js *jobs) lookup(key string) []jobRef {
	js.mu.Lock()
	defer js.mu.Unlock()
	refs := []jobRef{}
	for _, j := range js.byKey[key] {
		refs = append(refs, jobRef{JobID: j.id, Status: j.status})
	}
	return refs
}

// get returns a snapshot of job id, or false.
func (js *jobs) get(id string) (job, bool) {
	js.mu.Lock()
	defer js.mu.Unlock()
	j, ok := js.byID[id]
	if !ok {
		return job{}, false
	}
	return *j, true
}

// cancel stops job id if it is running and reports whether it did; a job
// that already ended is left as it is.
func (js *jobs) cancel(id string) (jobStatus, bool, bool) {
	js.mu.Lock()
	defer js.mu.Unlock()
	j, ok := js.byID[id]
	if !ok {
		return "", false, false
	}
	if j.status != jobRunning {
		return j.status, j.status == jobCancelled, true
	}
	j.status = jobCancelled
	close(j.stop)
	return j.status, true, true
}

func textResult(isError bool, text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: isError, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}
