package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool names: the ones the scenarios call, then the provider contract.
const (
	toolGreet            = "greet"
	toolSlowCompute      = "slow_compute"
	toolFailingJob       = "failing_job"
	toolProtocolErrorJob = "protocol_error_job"
	toolConfirmDelete    = "confirm_delete"
	toolMultiInput       = "multi_input"
	toolWithTask         = "test_tool_with_task"
	toolLookupJob        = "lookup_job"
	toolGetJob           = "get_job"
	toolCancelJob        = "cancel_job"
)

// failingJobDelay is how long failing_job and protocol_error_job run: the
// scenarios expect about a second.
const failingJobDelay = time.Second

// maxSeconds bounds slow_compute, so that a mistyped call cannot hold a job
// for hours.
const maxSeconds = 600

type greetArgs struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

type slowComputeArgs struct {
	Seconds        float64 `json:"seconds" jsonschema:"how long to compute, in seconds; 0 answers at once"`
	Label          string  `json:"label,omitempty" jsonschema:"a label echoed in the result"`
	IdempotencyKey string  `json:"idempotency_key,omitempty" jsonschema:"reuse the same value when retrying: a key that already has a job returns that job instead of running another"`
}

type keyArgs struct {
	IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"reuse the same value when retrying: a key that already has a job returns that job instead of running another"`
}

type confirmDeleteArgs struct {
	Filename       string `json:"filename" jsonschema:"the file to delete once the user confirms"`
	IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"reuse the same value when retrying: a key that already has a job returns that job instead of running another"`
}

type lookupArgs struct {
	IdempotencyKey string `json:"idempotency_key" jsonschema:"the idempotency key a job-running call carried"`
}

// lookupResult is lookup_job's structured result.
type lookupResult struct {
	// Status is lookupNotFound or the status of the key's first job.
	Status string   `json:"status"`
	JobID  string   `json:"job_id,omitempty"`
	Jobs   []jobRef `json:"jobs"`
}

type jobRef struct {
	JobID  string    `json:"job_id"`
	Status jobStatus `json:"status"`
}

type jobArgs struct {
	JobID string `json:"job_id" jsonschema:"a job ID such as slow_compute-3"`
}

// jobInfo is get_job's structured result.
type jobInfo struct {
	JobID  string    `json:"job_id"`
	Tool   string    `json:"tool"`
	Status jobStatus `json:"status"`
	// IsError tells that a completed job ended in a tool error.
	IsError bool `json:"is_error,omitempty"`
	// Error is the JSON-RPC error of a failed job.
	Error *jsonrpc.Error `json:"error,omitempty"`
}

// cancelResult is cancel_job's structured result.
type cancelResult struct {
	JobID  string    `json:"job_id"`
	Status jobStatus `json:"status"`
	// EffectReversed is true when the job was stopped before it delivered
	// anything; a job that had already ended answers false.
	EffectReversed bool   `json:"effect_reversed"`
	Message        string `json:"message"`
}

// fixture is the server's state: its jobs.
type fixture struct {
	jobs *jobs
}

// newHandler returns the HTTP handler: Streamable HTTP at /mcp, stateless.
func newHandler(logger *slog.Logger) http.Handler {
	server := newServer(logger)
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{
		Stateless: true,
		// A caller that stops waiting ends the tool call; its job goes on.
		PropagateRequestCancellation: true,
		Logger:                       logger,
	}))
	return mux
}

func newServer(logger *slog.Logger) *mcp.Server {
	f := &fixture{jobs: newJobs()}
	server := mcp.NewServer(&mcp.Implementation{Name: "conformance-upstream", Version: "1.0.0"}, &mcp.ServerOptions{Logger: logger})
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}
	mcp.AddTool(server, &mcp.Tool{Name: toolGreet, Description: "Answers Hello, NAME! at once.", Annotations: readOnly}, f.greet)
	mcp.AddTool(server, &mcp.Tool{Name: toolSlowCompute, Description: "Runs a job that sleeps the given seconds, then answers; cancel_job stops it."}, f.slowCompute)
	mcp.AddTool(server, &mcp.Tool{Name: toolFailingJob, Description: "Runs a job that ends in a tool error after about a second."}, f.failingJob)
	mcp.AddTool(server, &mcp.Tool{Name: toolProtocolErrorJob, Description: "Runs a job that ends in a JSON-RPC internal error after about a second."}, f.protocolErrorJob)
	mcp.AddTool(server, &mcp.Tool{Name: toolConfirmDelete, Description: "Asks the user to confirm, then deletes the file (nothing is really deleted)."}, f.confirmDelete)
	mcp.AddTool(server, &mcp.Tool{Name: toolMultiInput, Description: "Asks the user two questions at once, then answers with both replies."}, f.multiInput)
	mcp.AddTool(server, &mcp.Tool{Name: toolWithTask, Description: "Asks the user's name, then greets them from a job."}, f.withTask)
	mcp.AddTool(server, &mcp.Tool{Name: toolLookupJob, Description: "Looks up the jobs started with an idempotency key.", Annotations: readOnly}, f.lookupJob)
	mcp.AddTool(server, &mcp.Tool{Name: toolGetJob, Description: "Reports one job's status and, once it has ended, its result.", Annotations: readOnly}, f.getJob)
	notDestructive := false
	mcp.AddTool(server, &mcp.Tool{Name: toolCancelJob, Description: "Stops a running job; a job that has ended is left as it is.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &notDestructive, IdempotentHint: true}}, f.cancelJob)
	return server
}

func (f *fixture) greet(_ context.Context, _ *mcp.CallToolRequest, args greetArgs) (*mcp.CallToolResult, any, error) {
	return textResult(false, fmt.Sprintf("Hello, %s!", args.Name)), nil, nil
}

func (f *fixture) slowCompute(ctx context.Context, _ *mcp.CallToolRequest, args slowComputeArgs) (*mcp.CallToolResult, any, error) {
	if args.Seconds < 0 || args.Seconds > maxSeconds || math.IsNaN(args.Seconds) {
		return nil, nil, fmt.Errorf("seconds must be between 0 and %d; got %v", maxSeconds, args.Seconds)
	}
	d := time.Duration(args.Seconds * float64(time.Second))
	j := f.jobs.start(toolSlowCompute, args.IdempotencyKey, func(stop <-chan struct{}) (*mcp.CallToolResult, *jsonrpc.Error, bool) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-stop:
			return nil, nil, true
		case <-t.C:
		}
		res := textResult(false, fmt.Sprintf("computed %q in %gs", args.Label, args.Seconds))
		res.StructuredContent = map[string]any{"label": args.Label, "seconds": args.Seconds}
		return res, nil, false
	})
	return f.answer(ctx, j)
}

func (f *fixture) failingJob(ctx context.Context, _ *mcp.CallToolRequest, args keyArgs) (*mcp.CallToolResult, any, error) {
	j := f.jobs.start(toolFailingJob, args.IdempotencyKey, func(stop <-chan struct{}) (*mcp.CallToolResult, *jsonrpc.Error, bool) {
		if !sleep(failingJobDelay, stop) {
			return nil, nil, true
		}
		return textResult(true, "failing_job failed, as it always does: the tool ran and reports an error"), nil, false
	})
	return f.answer(ctx, j)
}

func (f *fixture) protocolErrorJob(ctx context.Context, _ *mcp.CallToolRequest, args keyArgs) (*mcp.CallToolResult, any, error) {
	j := f.jobs.start(toolProtocolErrorJob, args.IdempotencyKey, func(stop <-chan struct{}) (*mcp.CallToolResult, *jsonrpc.Error, bool) {
		if !sleep(failingJobDelay, stop) {
			return nil, nil, true
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "protocol_error_job crashed, as it always does"}, false
	})
	return f.answer(ctx, j)
}

// confirmDelete asks for a confirmation in its first round and runs its job
// in the round that carries the answer.
func (f *fixture) confirmDelete(ctx context.Context, req *mcp.CallToolRequest, args confirmDeleteArgs) (*mcp.CallToolResult, any, error) {
	const key = "confirm"
	resp, ok := req.Params.InputResponses[key]
	if !ok {
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{
			key: elicitation(fmt.Sprintf("Delete %s?", args.Filename), "confirm", "boolean"),
		}}, nil, nil
	}
	answer, err := elicited(resp, key)
	if err != nil {
		return nil, nil, err
	}
	confirmed := answer.Action == "accept" && answer.Content["confirm"] == true
	j := f.jobs.start(toolConfirmDelete, args.IdempotencyKey, func(<-chan struct{}) (*mcp.CallToolResult, *jsonrpc.Error, bool) {
		if !confirmed {
			return textResult(false, fmt.Sprintf("kept %s: the user did not confirm", args.Filename)), nil, false
		}
		return textResult(false, fmt.Sprintf("deleted %s", args.Filename)), nil, false
	})
	return f.answer(ctx, j)
}

// multiInput asks two questions at once. A round may answer some of them:
// the answers so far travel in requestState, and the questions still open
// are asked again, until both are answered.
func (f *fixture) multiInput(ctx context.Context, req *mcp.CallToolRequest, args keyArgs) (*mcp.CallToolResult, any, error) {
	questions := []struct{ key, message, property, kind string }{
		{"name", "What is your name?", "name", "string"},
		{"confirm", "Go ahead?", "confirm", "boolean"},
	}
	answers, err := decodeState(req.Params.RequestState)
	if err != nil {
		return nil, nil, err
	}
	for k, resp := range req.Params.InputResponses {
		a, err := elicited(resp, k)
		if err != nil {
			return nil, nil, err
		}
		answers[k] = a.Content
	}
	open := mcp.InputRequestMap{}
	for _, q := range questions {
		if _, ok := answers[q.key]; !ok {
			open[q.key] = elicitation(q.message, q.property, q.kind)
		}
	}
	if len(open) > 0 {
		state, err := encodeState(answers)
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{InputRequests: open, RequestState: state}, nil, nil
	}
	text := fmt.Sprintf("name=%v confirm=%v", answers["name"]["name"], answers["confirm"]["confirm"])
	j := f.jobs.start(toolMultiInput, args.IdempotencyKey, func(<-chan struct{}) (*mcp.CallToolResult, *jsonrpc.Error, bool) {
		return textResult(false, text), nil, false
	})
	return f.answer(ctx, j)
}

// withTask asks the user's name in its first round, then runs a job that
// greets them.
func (f *fixture) withTask(ctx context.Context, req *mcp.CallToolRequest, args keyArgs) (*mcp.CallToolResult, any, error) {
	const key = "user_name"
	resp, ok := req.Params.InputResponses[key]
	if !ok {
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{
			key: elicitation("What is your name?", "name", "string"),
		}}, nil, nil
	}
	answer, err := elicited(resp, key)
	if err != nil {
		return nil, nil, err
	}
	name, _ := answer.Content["name"].(string)
	if answer.Action != "accept" || name == "" {
		return textResult(true, "no name was given, so there is nobody to greet"), nil, nil
	}
	j := f.jobs.start(toolWithTask, args.IdempotencyKey, func(<-chan struct{}) (*mcp.CallToolResult, *jsonrpc.Error, bool) {
		return textResult(false, fmt.Sprintf("Hello, %s! Your task is done.", name)), nil, false
	})
	return f.answer(ctx, j)
}

func (f *fixture) lookupJob(_ context.Context, _ *mcp.CallToolRequest, args lookupArgs) (*mcp.CallToolResult, any, error) {
	if args.IdempotencyKey == "" {
		return nil, nil, errors.New("idempotency_key is required")
	}
	out := lookupResult{Status: lookupNotFound, Jobs: f.jobs.lookup(args.IdempotencyKey)}
	if len(out.Jobs) > 0 {
		out.Status, out.JobID = string(out.Jobs[0].Status), out.Jobs[0].JobID
	}
	return structured(fmt.Sprintf("%d job(s) for this key; the first is %s", len(out.Jobs), out.Status), out)
}

// getJob reports a job. A job that ended with a tool result answers with
// that result's content (a tool error too, as an answer, not as an error:
// get_job itself worked).
func (f *fixture) getJob(_ context.Context, _ *mcp.CallToolRequest, args jobArgs) (*mcp.CallToolResult, any, error) {
	j, ok := f.jobs.get(args.JobID)
	if !ok {
		return nil, nil, fmt.Errorf("no job %q; job IDs look like slow_compute-3", args.JobID)
	}
	info := jobInfo{JobID: j.id, Tool: j.tool, Status: j.status, Error: j.err}
	switch {
	case j.status == jobCompleted && j.result != nil:
		info.IsError = j.result.IsError
		res := &mcp.CallToolResult{Content: j.result.Content}
		var err error
		if res.StructuredContent, err = toObject(info); err != nil {
			return nil, nil, err
		}
		return res, nil, nil
	case j.status == jobFailed:
		return structured(fmt.Sprintf("job %s failed: %s", j.id, j.err.Message), info)
	default:
		return structured(fmt.Sprintf("job %s is %s", j.id, j.status), info)
	}
}

func (f *fixture) cancelJob(_ context.Context, _ *mcp.CallToolRequest, args jobArgs) (*mcp.CallToolResult, any, error) {
	status, reversed, ok := f.jobs.cancel(args.JobID)
	if !ok {
		return nil, nil, fmt.Errorf("no job %q; job IDs look like slow_compute-3", args.JobID)
	}
	out := cancelResult{JobID: args.JobID, Status: status, EffectReversed: reversed, Message: "job stopped before it delivered anything"}
	if !reversed {
		out.Message = "job had already ended " + string(status) + "; nothing was undone"
	}
	return structured(out.Message, out)
}

// answer waits for j and answers the call with its result, its job ID
// added to the structured content so that a gateway can bind it.
func (f *fixture) answer(ctx context.Context, j *job) (*mcp.CallToolResult, any, error) {
	res, err := f.jobs.wait(ctx, j)
	if err != nil {
		return nil, nil, err
	}
	out := *res
	fields := map[string]any{}
	if res.StructuredContent != nil {
		m, ok := res.StructuredContent.(map[string]any)
		if !ok {
			return nil, nil, fmt.Errorf("job %s holds structured content that is not an object", j.id)
		}
		for k, v := range m {
			fields[k] = v
		}
	}
	fields["job_id"] = j.id
	out.StructuredContent = fields
	return &out, nil, nil
}

// sleep waits d and reports true, or false when stop closes first.
func sleep(d time.Duration, stop <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-stop:
		return false
	case <-t.C:
		return true
	}
}

// elicitation is a form elicitation asking for one property.
func elicitation(message, property, kind string) *mcp.ElicitParams {
	return &mcp.ElicitParams{
		Mode:    "form",
		Message: message,
		RequestedSchema: &jsonschema.Schema{
			Type:       "object",
			Properties: map[string]*jsonschema.Schema{property: {Type: kind}},
			Required:   []string{property},
		},
	}
}

// elicited reads the answer to an elicitation input request.
func elicited(resp mcp.InputResponse, key string) (*mcp.ElicitResult, error) {
	r, ok := resp.(*mcp.ElicitResult)
	if !ok || r == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(
			"inputResponses[%q] must answer an elicitation: {\"action\": \"accept\", \"content\": {...}}", key)}
	}
	return r, nil
}

// encodeState and decodeState carry the answers given so far in an opaque
// requestState, so that the server keeps nothing between rounds.
func encodeState(answers map[string]map[string]any) (string, error) {
	b, err := json.Marshal(answers)
	if err != nil {
		return "", fmt.Errorf("encoding requestState: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func decodeState(s string) (map[string]map[string]any, error) {
	answers := map[string]map[string]any{}
	if strings.TrimSpace(s) == "" {
		return answers, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &answers)
	}
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "requestState is not one this server issued; send back the requestState of the previous result unchanged"}
	}
	return answers, nil
}

// structured answers with text and v as the structured content.
func structured(text string, v any) (*mcp.CallToolResult, any, error) {
	obj, err := toObject(v)
	if err != nil {
		return nil, nil, err
	}
	res := textResult(false, text)
	res.StructuredContent = obj
	return res, nil, nil
}

func toObject(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}
