package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/taskwire"
)

// elicitingClient connects a client whose user answers approval forms
// with answer (nil: declines).
func elicitingClient(t *testing.T, h *fixtures.Harness, version string, answer map[string]any) *mcp.ClientSession {
	t.Helper()
	ctx := testCtx(t)
	key, err := h.Key(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "eliciting"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if answer == nil {
				return &mcp.ElicitResult{Action: "decline"}, nil
			}
			return &mcp.ElicitResult{Action: "accept", Content: answer}, nil
		},
	})
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: h.MCPURL(), MaxRetries: -1,
		HTTPClient: &http.Client{Transport: fixtures.Bearer{Key: key}},
	}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestApprovalByElicitation(t *testing.T) {
	for _, tt := range []struct {
		name, version string
	}{{"2025-11-25 elicitation", "2025-11-25"}, {"2026-07-28 input_required", ""}} {
		t.Run(tt.name, func(t *testing.T) {
			h := harness(t, &fixtures.Options{Config: fixtures.ConfigOptions{Approval: true}, EditConfig: approvalFormCap("20.00")})
			cs := elicitingClient(t, h, tt.version, map[string]any{"max_total_cost": "20.00", "max_remote_jobs": 1})
			res, err := cs.CallTool(testCtx(t), fixtures.RunSuiteCall("op-elicited", nil))
			if err != nil || res.IsError {
				t.Fatalf("tools/call = %+v, %v", res, err)
			}
			if n := len(h.Sim.Jobs()); n != 1 {
				t.Fatalf("provider jobs = %d, want 1", n)
			}
			list, err := h.Store.ApprovalList(testCtx(t), &ledger.ApprovalListParams{Tenant: "acme", OperationID: "op-elicited"})
			if err != nil || len(list) != 1 || list[0].MaxTotalCost.String() != "18.00" || list[0].CreatedBy != ledger.ApprovedByClientUser {
				t.Fatalf("approvals = %+v, %v", list, err)
			}
		})
	}
}

func TestDeclinedApprovalStartsNothing(t *testing.T) {
	h := harness(t, &fixtures.Options{Config: fixtures.ConfigOptions{Approval: true}, EditConfig: approvalFormCap("20.00")})
	cs := elicitingClient(t, h, "2025-11-25", nil)
	_, err := cs.CallTool(testCtx(t), fixtures.RunSuiteCall("op-declined", nil))
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) {
		t.Fatalf("tools/call error = %v, want a JSON-RPC error", err)
	}
	var data struct{ Reason string }
	_ = json.Unmarshal(rpcErr.Data, &data)
	if data.Reason != "approval_declined" {
		t.Fatalf("reason = %q (%s), want approval_declined", data.Reason, rpcErr.Message)
	}
	if n := len(h.Sim.Jobs()); n != 0 {
		t.Fatalf("provider jobs = %d, want 0", n)
	}
}

func TestWithoutElicitationTheErrorSaysHowToApprove(t *testing.T) {
	h := harness(t, &fixtures.Options{Config: fixtures.ConfigOptions{Approval: true}})
	cs := connect(t, h, "acme", fixtures.EraPlain)
	_, err := cs.CallTool(testCtx(t), fixtures.RunSuiteCall("op-unapproved", nil))
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("error = %v, want -32602", err)
	}
	var data struct {
		Reason       string `json:"reason"`
		HowToApprove string `json:"how_to_approve"`
	}
	_ = json.Unmarshal(rpcErr.Data, &data)
	if data.Reason != ledger.ReasonApprovalRequired || data.HowToApprove == "" {
		t.Fatalf("data = %s", rpcErr.Data)
	}
	if n := len(h.Sim.Jobs()); n != 0 {
		t.Fatalf("provider jobs = %d, want 0", n)
	}
}

// rawCall posts one 2026-07-28 tools/call of run_suite as bytes, the way a
// client that writes its own requests would, and returns the JSON-RPC
// response. elicits declares elicitation in the per-request capabilities;
// answer, when set, is sent as the approval question's answer with state as
// requestState.
func rawCall(t *testing.T, h *fixtures.Harness, opID string, elicits bool, answer map[string]any, state string) map[string]any {
	t.Helper()
	var elicitation, response map[string]any
	if elicits {
		elicitation = map[string]any{}
	}
	if answer != nil {
		response = map[string]any{"action": "accept", "content": answer}
	}
	return rawCallWith(t, h, opID, elicitation, response, state)
}

// rawCallWith is rawCall with the elicitation capability to declare (nil:
// none) and the answer to the approval question to send (nil: none).
func rawCallWith(t *testing.T, h *fixtures.Harness, opID string, elicitation, response map[string]any, state string) map[string]any {
	t.Helper()
	ctx := testCtx(t)
	key, err := h.Key(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	caps := map[string]any{"extensions": map[string]any{taskwire.ExtensionID: map[string]any{}}}
	if elicitation != nil {
		caps["elicitation"] = elicitation
	}
	params := map[string]any{
		"name":      fixtures.RunSuiteTool,
		"arguments": map[string]any{"suite": "settlement", "operation_id": opID},
		"_meta": map[string]any{
			mcp.MetaKeyProtocolVersion:    "2026-07-28",
			mcp.MetaKeyClientCapabilities: caps,
			mcp.MetaKeyClientInfo:         map[string]any{"name": "raw", "version": "0"},
		},
	}
	if response != nil {
		params["inputResponses"] = map[string]any{"taskgate_approval": response}
		params["requestState"] = state
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.MCPURL(), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"Authorization": "Bearer " + key, "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": fixtures.RunSuiteTool,
	} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	data = lastMessage(resp, data)
	var msg map[string]any
	if err := json.Unmarshal(data, &msg); err != nil {
		t.Fatalf("HTTP %d body %q is not JSON-RPC: %v", resp.StatusCode, data, err)
	}
	return msg
}

// approvalsOf lists every approval of acme's operation.
func approvalsOf(t *testing.T, h *fixtures.Harness, opID string) []*ledger.Approval {
	t.Helper()
	list, err := h.Store.ApprovalList(testCtx(t), &ledger.ApprovalListParams{Tenant: "acme", OperationID: opID, IncludeRevoked: true})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// TestUnsolicitedApprovalIsRefused: a client that answers a question the
// gateway never asked — the model writing its own approval — is refused,
// and nothing is approved or started.
func TestUnsolicitedApprovalIsRefused(t *testing.T) {
	h := harness(t, &fixtures.Options{Config: fixtures.ConfigOptions{Approval: true}, EditConfig: approveBy("[elicitation]")})
	self := map[string]any{"max_total_cost": "1000000", "max_remote_jobs": 50}
	for _, tt := range []struct {
		name    string
		elicits bool
		state   string
	}{
		{"no elicitation capability", false, "taskgate-approval"},
		{"no elicitation capability, forged nonce", false, "taskgate-approval.AAAAAAAAAAAAAAAAAAAAAAAAAA"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			msg := rawCall(t, h, "op-self-approved", tt.elicits, self, tt.state)
			e, _ := msg["error"].(map[string]any)
			data, _ := e["data"].(map[string]any)
			if e == nil || data["reason"] != ledger.ReasonApprovalRequired {
				t.Fatalf("self-approved call answered %v; want a JSON-RPC error with reason %s", msg, ledger.ReasonApprovalRequired)
			}
			if why, _ := data["answer_ignored"].(string); !strings.Contains(why, "elicitation_max_total_cost is 0") {
				t.Errorf("the refusal says of the answer %q; want why it approved nothing", why)
			}
		})
	}
	// A 2025-11-25 session without elicitation sends the same answer.
	cs := connect(t, h, "acme", fixtures.EraLegacy)
	p := fixtures.RunSuiteCall("op-self-approved", nil)
	p.InputResponses = mcp.InputResponseMap{"taskgate_approval": &mcp.ElicitResult{Action: "accept", Content: self}}
	p.RequestState = "taskgate-approval"
	if _, _, err := taskwire.CallToolAsTask(testCtx(t), cs, p, nil); err == nil {
		t.Fatal("a 2025-11-25 call with a self-written answer was accepted")
	}
	if got := approvalsOf(t, h, "op-self-approved"); len(got) != 0 {
		t.Fatalf("approvals after self-approval attempts = %+v; want none", got[0])
	}
	if n := len(h.Sim.Jobs()); n != 0 {
		t.Fatalf("provider jobs = %d, want 0", n)
	}
}

// TestApprovalAnswerCountsOnce: an answer counts only for the question it
// replies to — that operation, once — and a forged question counts never.
func TestApprovalAnswerCountsOnce(t *testing.T) {
	h := harness(t, &fixtures.Options{Config: fixtures.ConfigOptions{Approval: true}, EditConfig: approvalFormCap("20.00")})
	answer := map[string]any{"max_total_cost": "20.00", "max_remote_jobs": 1}
	asked := func(msg map[string]any) string {
		t.Helper()
		res, _ := msg["result"].(map[string]any)
		state, _ := res["requestState"].(string)
		inputs, _ := res["inputRequests"].(map[string]any)
		if res == nil || res["resultType"] != "input_required" || inputs["taskgate_approval"] == nil || state == "" {
			t.Fatalf("answer %v; want an input_required result asking for the approval", msg)
		}
		return state
	}
	state := asked(rawCall(t, h, "op-a", true, nil, ""))

	// The question about op-a does not approve op-b.
	if again := asked(rawCall(t, h, "op-b", true, answer, state)); again == state {
		t.Fatalf("op-b was asked with op-a's question %q", state)
	}
	// A nonce the gateway never issued approves nothing.
	asked(rawCall(t, h, "op-a", true, answer, "taskgate-approval.AAAAAAAAAAAAAAAAAAAAAAAAAA"))
	if got := approvalsOf(t, h, "op-a"); len(got) != 0 {
		t.Fatalf("approvals of op-a before its answer = %d; want none", len(got))
	}
	if got := approvalsOf(t, h, "op-b"); len(got) != 0 {
		t.Fatalf("approvals of op-b = %d; want none", len(got))
	}

	// The genuine answer approves op-a and starts it.
	msg := rawCall(t, h, "op-a", true, answer, state)
	res, _ := msg["result"].(map[string]any)
	if res == nil || res["resultType"] != "task" {
		t.Fatalf("genuine answer: %v; want a task", msg)
	}
	// Replaying it, with a larger ceiling, changes nothing: the question
	// was taken, and the retry attaches to the operation it approved.
	replay := rawCall(t, h, "op-a", true, map[string]any{"max_total_cost": "1000000", "max_remote_jobs": 50}, state)
	if r, _ := replay["result"].(map[string]any); r == nil || r["taskId"] != res["taskId"] {
		t.Fatalf("replayed answer: %v; want the same task %v", replay, res["taskId"])
	}
	got := approvalsOf(t, h, "op-a")
	if len(got) != 1 || got[0].MaxTotalCost.String() != "18.00" || got[0].MaxRemoteJobs != 1 {
		t.Fatalf("approvals of op-a = %+v; want exactly the one answered, capped at the route: 18.00 and 1 job", got)
	}
	testwait.Until(t, testCtx(t), "the approved operation to start a provider job", func() (bool, error) {
		return len(h.Sim.Jobs()) > 0, nil
	})
	if n := len(h.Sim.Jobs()); n != 1 {
		t.Fatalf("provider jobs = %d, want 1", n)
	}
}

// TestHowToApproveIsQuoted: an operation ID a shell would act on is
// refused at acceptance; one of the alphabet that a shell would still
// expand unquoted reaches the suggested command as one quoted shell word,
// and run by a shell the command does nothing else.
func TestHowToApproveIsQuoted(t *testing.T) {
	h := harness(t, &fixtures.Options{Config: fixtures.ConfigOptions{Approval: true}})
	cs := connect(t, h, "acme", fixtures.EraPlain)
	dir := t.TempDir()
	// An operation ID a shell would act on never gets this far: it is
	// refused at acceptance, with no command to run.
	hostile := "x; touch " + dir + "/pwned # it's $(touch " + dir + "/pwned2)"
	_, err := cs.CallTool(testCtx(t), fixtures.RunSuiteCall(hostile, nil))
	if _, reason, _ := fixtures.ErrorReason(err); reason != ledger.ReasonInvalidOperationID || !strings.Contains(err.Error(), `";" (U+003B) at byte 1`) {
		t.Fatalf("a shell-hostile operation ID = %v; want %s naming \";\" at byte 1", err, ledger.ReasonInvalidOperationID)
	}
	// One of the alphabet that a shell would still expand unquoted (a
	// leading tilde) reaches the command quoted.
	opID := "~root"
	_, err = cs.CallTool(testCtx(t), fixtures.RunSuiteCall(opID, nil))
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) {
		t.Fatalf("error = %v, want a JSON-RPC error", err)
	}
	var data struct {
		HowToApprove string `json:"how_to_approve"`
	}
	_ = json.Unmarshal(rpcErr.Data, &data)
	cmd, ok := strings.CutPrefix(data.HowToApprove, "taskgate approve ")
	if !ok {
		t.Fatalf("how_to_approve = %q", data.HowToApprove)
	}
	// The shell sees the command's arguments; printf shows them one a line.
	out, err := exec.CommandContext(testCtx(t), "/bin/sh", "-c", "set -- "+cmd+"; printf '%s\\n' \"$@\"").Output()
	if err != nil {
		t.Fatalf("the shell could not parse %q: %v", cmd, err)
	}
	args := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if i := slices.Index(args, "--operation-id"); i < 0 || i+1 >= len(args) || args[i+1] != opID {
		t.Errorf("the shell read the arguments %q; want --operation-id followed by %q", args, opID)
	}
	for _, f := range []string{"pwned", "pwned2"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("running how_to_approve created %s", f)
		}
	}
}

// A call that fans out is approved as a whole: the approval question names
// its remote jobs and their total, and proposes them as the job limit; the
// user's answer with the proposals approves the whole matrix.
func TestApprovalOfAFanOutByElicitation(t *testing.T) {
	h := harness(t, &fixtures.Options{EditConfig: approvalFormCap("100.00")})
	ctx := testCtx(t)
	key, err := h.Key(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	var message string
	client := mcp.NewClient(&mcp.Implementation{Name: "eliciting"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			message = req.Params.Message
			// Accept what the form proposes.
			answer := map[string]any{}
			props, _ := req.Params.RequestedSchema.(map[string]any)["properties"].(map[string]any)
			for name, p := range props {
				answer[name] = p.(map[string]any)["default"]
			}
			return &mcp.ElicitResult{Action: "accept", Content: answer}, nil
		},
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: h.MCPURL(), MaxRetries: -1,
		HTTPClient: &http.Client{Transport: fixtures.Bearer{Key: key}},
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	res, err := cs.CallTool(ctx, fixtures.RunMatrixCall("op-matrix", "smoke", 4))
	if err != nil || res.IsError {
		t.Fatalf("tools/call = %+v, %v", res, err)
	}
	if !strings.Contains(message, "it would start 4 remote jobs, estimated at 72.00 USD in all") {
		t.Errorf("the approval question says %q, want it to name the 4 remote jobs and their 72.00 USD", message)
	}
	list, err := h.Store.ApprovalList(ctx, &ledger.ApprovalListParams{Tenant: "acme", OperationID: "op-matrix"})
	if err != nil || len(list) != 1 || list[0].MaxRemoteJobs != 4 || list[0].MaxTotalCost.String() != "72.00" {
		t.Fatalf("approvals = %+v, %v; want one for 4 remote jobs and 72.00", list, err)
	}
	if n := len(h.Sim.Jobs()); n != 4 {
		t.Fatalf("provider jobs = %d, want 4", n)
	}
}

// Without elicitation, the ready approve command covers the whole route.
func TestHowToApproveAFanOut(t *testing.T) {
	h := harness(t, &fixtures.Options{})
	cs := connect(t, h, "acme", fixtures.EraPlain)
	_, err := cs.CallTool(testCtx(t), fixtures.RunMatrixCall("op-matrix", "smoke", 4))
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("error = %v, want -32602", err)
	}
	var data struct {
		Reason       string `json:"reason"`
		HowToApprove string `json:"how_to_approve"`
	}
	_ = json.Unmarshal(rpcErr.Data, &data)
	if data.Reason != ledger.ReasonApprovalRequired || !strings.Contains(data.HowToApprove, "--max-total-cost 72.00 --max-remote-jobs 4") {
		t.Fatalf("data = %s; want approval_required with a command for 4 remote jobs and 72.00", rpcErr.Data)
	}
	if n := len(h.Sim.Jobs()); n != 0 {
		t.Fatalf("provider jobs = %d, want 0", n)
	}
}

// approvalFormCap rewrites the harness's configuration so that a form
// answer may approve the approval-gated tools up to amount.
func approvalFormCap(amount string) func(string) string {
	return func(y string) string {
		return strings.ReplaceAll(y, "        approval: required\n", "        approval: required\n        elicitation_max_total_cost: \""+amount+"\"\n")
	}
}

// approvalEras are the two ways a client is asked in the protocol: an
// elicitation over a 2025-11-25 session, and a 2026-07-28 input_required
// result that the SDK's client answers and retries.
var approvalEras = []struct{ name, version string }{{"2025-11-25 elicitation", "2025-11-25"}, {"2026-07-28 input_required", ""}}

// An agent answering its own approval question approves nothing under the
// default policy: no form is asked, whatever the client answers no
// approval is recorded, and no job runs.
func TestSelfApprovalApprovesNothing(t *testing.T) {
	self := map[string]any{"max_total_cost": "500.00", "max_remote_jobs": 5}
	for _, era := range approvalEras {
		t.Run(era.name, func(t *testing.T) {
			h := harness(t, &fixtures.Options{Config: fixtures.ConfigOptions{Approval: true}})
			cs := elicitingClient(t, h, era.version, self)
			res, err := cs.CallTool(testCtx(t), fixtures.RunSuiteCall("op-self", nil))
			if err == nil {
				t.Fatalf("the self-approved call answered %+v; want approval_required", res)
			}
			if reason, data := reasonOf(t, err); reason != ledger.ReasonApprovalRequired || !strings.Contains(string(data), "approval_request") {
				t.Fatalf("the self-approved call: %s; want approval_required naming the approval request a human must decide", data)
			}
			if got := approvalsOf(t, h, "op-self"); len(got) != 0 {
				t.Fatalf("approvals after the agent's own accept = %+v; want none", got[0])
			}
			if n := len(h.Sim.Jobs()); n != 0 {
				t.Fatalf("provider jobs = %d, want 0", n)
			}
		})
	}
	// A 2026-07-28 client that takes tasks and answers with a question
	// of its own making gets a task that waits for an approver.
	h := harness(t, &fixtures.Options{Config: fixtures.ConfigOptions{Approval: true}})
	first := rawCall(t, h, "op-self-task", true, nil, "")
	state := "taskgate-approval.AAAAAAAAAAAAAAAAAAAAAAAAAA"
	if res, _ := first["result"].(map[string]any); res != nil && res["requestState"] != nil {
		state, _ = res["requestState"].(string)
	}
	rawCall(t, h, "op-self-task", true, self, state)
	if got := approvalsOf(t, h, "op-self-task"); len(got) != 0 {
		t.Fatalf("approvals after the agent's own accept = %+v; want none", got[0])
	}
	op, err := h.Store.OperationGet(testCtx(t), &ledger.OperationGetParams{Tenant: "acme", OperationID: "op-self-task"})
	if err != nil || op.State != ledger.StateAwaitingApproval {
		t.Fatalf("operation = %+v, %v; want it awaiting an approver", op, err)
	}
	if n := len(h.Sim.Jobs()); n != 0 {
		t.Fatalf("provider jobs = %d, want 0", n)
	}
}

// With elicitation_max_total_cost set, a form answer approves no more
// than the route's estimate and remote jobs and the cap, whatever ceiling
// and job limit it sends.
func TestFormApprovalIsCapped(t *testing.T) {
	for _, era := range approvalEras {
		t.Run(era.name, func(t *testing.T) {
			h := harness(t, &fixtures.Options{Config: fixtures.ConfigOptions{Approval: true}, EditConfig: approvalFormCap("100.00")})
			for i, tt := range []struct {
				answer   map[string]any
				runners  int // 0: run_suite (18.00, 1 job); otherwise run_matrix
				ceiling  string
				jobs     int
				startsOK bool
			}{
				{map[string]any{"max_total_cost": "500.00", "max_remote_jobs": 5}, 0, "18.00", 1, true},
				{map[string]any{"max_total_cost": "1000000", "max_remote_jobs": 50}, 0, "18.00", 1, true},
				{map[string]any{"max_total_cost": "18.00"}, 0, "18.00", 1, true},
				{map[string]any{"max_total_cost": "5.00", "max_remote_jobs": 1}, 0, "5.00", 1, false},
				{map[string]any{"max_total_cost": "1141.76", "max_remote_jobs": 64}, 4, "72.00", 4, true},
				{map[string]any{"max_total_cost": "72.00", "max_remote_jobs": 2}, 4, "72.00", 2, false},
			} {
				opID := fmt.Sprintf("op-capped-%d", i)
				// Each case is different work: the same arguments under a
				// new operation ID would be refused as a retry.
				suite := fmt.Sprintf("capped-%d", i)
				call := fixtures.RunSuiteCall(opID, map[string]any{"suite": suite})
				if tt.runners > 0 {
					call = fixtures.RunMatrixCall(opID, suite, tt.runners)
				}
				before := len(h.Sim.Jobs())
				cs := elicitingClient(t, h, era.version, tt.answer)
				res, err := cs.CallTool(testCtx(t), call)
				if started := err == nil && !res.IsError; started != tt.startsOK {
					t.Errorf("answer %v: tools/call = %+v, %v; want started %v", tt.answer, res, err, tt.startsOK)
				}
				got := approvalsOf(t, h, opID)
				if len(got) != 1 || got[0].MaxTotalCost.String() != tt.ceiling || got[0].MaxRemoteJobs != tt.jobs || got[0].CreatedBy != ledger.ApprovedByClientUser {
					t.Fatalf("answer %v: approvals = %+v; want one of %s and %d jobs by %q", tt.answer, got, tt.ceiling, tt.jobs, ledger.ApprovedByClientUser)
				}
				want := 0
				if tt.startsOK {
					want = max(tt.runners, 1)
				}
				if n := len(h.Sim.Jobs()) - before; n != want {
					t.Errorf("answer %v: provider jobs = %d, want %d", tt.answer, n, want)
				}
			}
		})
	}
}

// A route the cap does not cover is not offered a form: the call goes the
// request way, and the client is never asked.
func TestFormNotOfferedAboveTheCap(t *testing.T) {
	for _, era := range approvalEras {
		t.Run(era.name, func(t *testing.T) {
			h := harness(t, &fixtures.Options{Config: fixtures.ConfigOptions{Approval: true}, EditConfig: approvalFormCap("50.00")})
			cs := elicitingClient(t, h, era.version, map[string]any{"max_total_cost": "50.00", "max_remote_jobs": 4})
			_, err := cs.CallTool(testCtx(t), fixtures.RunMatrixCall("op-over-cap", "smoke", 4))
			if reason, data := reasonOf(t, err); reason != ledger.ReasonApprovalRequired || !strings.Contains(string(data), "approval_request") {
				t.Fatalf("a 72.00 matrix under a 50.00 cap: %s; want approval_required naming its approval request", data)
			}
			if got := approvalsOf(t, h, "op-over-cap"); len(got) != 0 {
				t.Fatalf("approvals = %+v; want none", got)
			}
			if n := len(h.Sim.Jobs()); n != 0 {
				t.Fatalf("provider jobs = %d, want 0", n)
			}
		})
	}
}

// consoleApprover is an approver of acme signed in to the console, with
// a browser's cookie jar.
type consoleApprover struct {
	t     *testing.T
	http  *http.Client
	base  string
	keyID int64
}

// openAsApprover follows pageURL, the page a URL elicitation named, as a
// person with a fresh browser would: it leads to the sign-in, and signing
// in with an approver key of acme returns to it.
func openAsApprover(t *testing.T, h *fixtures.Harness, pageURL string) *consoleApprover {
	t.Helper()
	key, k, err := authn.NewAPIKeyWithRole(testCtx(t), h.Store, "acme", "approver", ledger.RoleApprover)
	if err != nil {
		t.Fatal(err)
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	a := &consoleApprover{t: t, http: &http.Client{Jar: jar}, base: strings.TrimSuffix(h.MCPURL(), "/mcp"), keyID: k.ID}
	_, body := a.do(http.MethodGet, pageURL, nil)
	m := regexp.MustCompile(`name="next" value="([^"]+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("opening %s signed out did not lead to a sign-in that returns to it:\n%s", pageURL, body)
	}
	status, body := a.do(http.MethodPost, a.base+"/console/sign-in", url.Values{"credential": {key}, "next": {html.UnescapeString(m[1])}})
	if status != http.StatusOK || !strings.Contains(body, "Approval request") {
		t.Fatalf("signing in from %s: %d\n%s", pageURL, status, body)
	}
	return a
}

func (a *consoleApprover) do(method, target string, form url.Values) (int, string) {
	a.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(testCtx(a.t), method, target, body)
	if err != nil {
		a.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", a.base)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

var (
	consoleForm   = regexp.MustCompile(`(?s)<form method="post" action="([^"]+/(approve|decline))" class="(approve|decline)">(.*?)</form>`)
	consoleHidden = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)
)

// decide opens the page at pageURL, the one a URL elicitation named, and
// submits its verb form as it is filled in.
func (a *consoleApprover) decide(pageURL, verb string) {
	a.t.Helper()
	status, body := a.do(http.MethodGet, pageURL, nil)
	if status != http.StatusOK {
		a.t.Fatalf("GET %s: %d\n%s", pageURL, status, body)
	}
	for _, m := range consoleForm.FindAllStringSubmatch(body, -1) {
		if m[2] != verb {
			continue
		}
		// The form is sent with its hidden fields as they are: the CSRF
		// token and the kind and ID of the request it acts on.
		form := url.Values{}
		for _, h := range consoleHidden.FindAllStringSubmatch(m[4], -1) {
			form.Set(h[1], html.UnescapeString(h[2]))
		}
		if verb == "approve" {
			form.Set("max_total_cost", "18.00")
			form.Set("max_remote_jobs", "1")
		}
		if status, body := a.do(http.MethodPost, a.base+html.UnescapeString(m[1]), form); status != http.StatusOK {
			a.t.Fatalf("%s on the console: %d\n%s", verb, status, body)
		}
		return
	}
	a.t.Fatalf("the page at %s has no %s form:\n%s", pageURL, verb, body)
}

// urlClient connects a client that declares URL-mode elicitation and hands
// every URL it is sent to urls, consenting to open it, and the ID of every
// URL elicitation the server says has completed to completed.
func urlClient(t *testing.T, h *fixtures.Harness, version string, urls, completed chan<- string) *mcp.ClientSession {
	t.Helper()
	ctx := testCtx(t)
	key, err := h.Key(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "url-eliciting"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if req.Params.Mode != "url" {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"max_total_cost": "500.00", "max_remote_jobs": 5}}, nil
			}
			urls <- req.Params.URL
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
		ElicitationCompleteHandler: func(_ context.Context, n *mcp.ElicitationCompleteNotificationRequest) {
			completed <- n.Params.ElicitationID
		},
	})
	// As fixtures.Dial does, so that a 2025-11-25 call may take a task.
	if err := taskwire.InstallClient(client); err != nil {
		t.Fatal(err)
	}
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := client.Connect(ctx, taskwire.WrapClientTransport(&mcp.StreamableClientTransport{
		Endpoint: h.MCPURL(), MaxRetries: -1,
		HTTPClient: &http.Client{Transport: fixtures.Bearer{Key: key}},
	}), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// A client that declares URL-mode elicitation is sent to the console's
// page of its call's approval request; the call waits, with nothing
// started, until an approver decides there: approved, the one job runs
// under the approver's approval; declined, the call fails with nothing
// started.
func TestURLApprovalWaitsForTheConsole(t *testing.T) {
	for _, era := range approvalEras {
		for _, verb := range []string{"approve", "decline"} {
			t.Run(era.name+"/"+verb, func(t *testing.T) {
				// A form cap is set, and still the form is not asked: a
				// client that can be sent to the console is sent there.
				h := harness(t, &fixtures.Options{Config: fixtures.ConfigOptions{Approval: true}, EditConfig: approvalFormCap("20.00")})
				urls, completed := make(chan string, 4), make(chan string, 4)
				cs := urlClient(t, h, era.version, urls, completed)
				type answer struct {
					res *mcp.CallToolResult
					err error
				}
				done := make(chan answer, 1)
				go func() {
					res, err := cs.CallTool(testCtx(t), fixtures.RunSuiteCall("op-url", nil))
					done <- answer{res, err}
				}()
				var page string
				select {
				case page = <-urls:
				case a := <-done:
					t.Fatalf("the call ended before the user was sent anywhere: %+v, %v", a.res, a.err)
				case <-testCtx(t).Done():
					t.Fatal("no URL elicitation arrived")
				}
				base := strings.TrimSuffix(h.MCPURL(), "/mcp")
				if !strings.HasPrefix(page, base+"/console/requests/") {
					t.Fatalf("the user was sent to %q; want the console's page of the approval request", page)
				}
				// The client consented; the call still waits.
				op, err := h.Store.OperationGet(testCtx(t), &ledger.OperationGetParams{Tenant: "acme", OperationID: "op-url"})
				if err != nil || op.State != ledger.StateAwaitingApproval {
					t.Fatalf("operation after the client's answer = %+v, %v; want it awaiting approval", op, err)
				}
				if got := approvalsOf(t, h, "op-url"); len(got) != 0 {
					t.Fatalf("approvals before the approver decided = %+v; want none", got[0])
				}
				select {
				case a := <-done:
					t.Fatalf("the call ended before an approver decided: %+v, %v", a.res, a.err)
				default:
				}
				ap := openAsApprover(t, h, page)
				ap.decide(page, verb)
				a := <-done
				if era.version == "2025-11-25" {
					// The session hears that the page's business is done.
					want := "taskgate-approval-request-" + page[strings.LastIndex(page, "/")+1:]
					select {
					case id := <-completed:
						if id != want {
							t.Errorf("notifications/elicitation/complete named %q, want %q", id, want)
						}
					case <-testCtx(t).Done():
						t.Errorf("no notifications/elicitation/complete for %s", want)
					}
				}
				if verb == "decline" {
					if reason, data := reasonOf(t, a.err); reason != ledger.ReasonApprovalDeclined {
						t.Fatalf("declined in the console: %+v, %s; want approval_declined", a.res, data)
					}
					if n := len(h.Sim.Jobs()); n != 0 {
						t.Fatalf("provider jobs after the decline = %d, want 0", n)
					}
					return
				}
				if a.err != nil || a.res.IsError {
					t.Fatalf("approved in the console: %+v, %v", a.res, a.err)
				}
				if n := len(h.Sim.Jobs()); n != 1 {
					t.Fatalf("provider jobs = %d, want 1", n)
				}
				got := approvalsOf(t, h, "op-url")
				if len(got) != 1 || got[0].CreatedBy != fmt.Sprintf("api_key:%d", ap.keyID) {
					t.Fatalf("approvals = %+v; want the approver's one", got)
				}
			})
		}
	}
}

// A 2026-07-28 client that takes tasks and declares URL-mode elicitation
// is answered input_required with the URL of its approval request's page;
// its retry with its answer gets the task, which waits for the approver,
// and so does a retry with any answer at all; only the approver's
// decision starts the job.
func TestURLApprovalOfATask(t *testing.T) {
	h := harness(t, &fixtures.Options{Config: fixtures.ConfigOptions{Approval: true}})
	url := map[string]any{"form": map[string]any{}, "url": map[string]any{}}
	first := rawCallWith(t, h, "op-url-task", url, nil, "")
	res, _ := first["result"].(map[string]any)
	inputs, _ := res["inputRequests"].(map[string]any)
	asked, _ := inputs["taskgate_approval"].(map[string]any)
	q, _ := asked["params"].(map[string]any)
	page, _ := q["url"].(string)
	state, _ := res["requestState"].(string)
	if res["resultType"] != "input_required" || asked["method"] != "elicitation/create" || q["mode"] != "url" || !strings.Contains(page, "/console/requests/") || q["elicitationId"] == nil || state == "" {
		t.Fatalf("first call: %v; want input_required sending the user to the approval request's page", first)
	}
	// The same client asking again, before it answers, is sent to the
	// same page.
	again := rawCallWith(t, h, "op-url-task", url, nil, "")
	if r, _ := again["result"].(map[string]any); r["resultType"] != "input_required" || r["requestState"] != state {
		t.Fatalf("call again: %v; want the same question", again)
	}
	var taskID any
	for _, answer := range []map[string]any{
		{"action": "accept"},
		{"action": "accept", "content": map[string]any{"max_total_cost": "500.00", "max_remote_jobs": 5}},
	} {
		msg := rawCallWith(t, h, "op-url-task", url, answer, state)
		r, _ := msg["result"].(map[string]any)
		if r["resultType"] != "task" || r["status"] != "working" || (taskID != nil && r["taskId"] != taskID) {
			t.Fatalf("retry with %v: %v; want the one task, working", answer, msg)
		}
		taskID = r["taskId"]
	}
	if got := approvalsOf(t, h, "op-url-task"); len(got) != 0 {
		t.Fatalf("approvals before the approver decided = %+v; want none", got[0])
	}
	if n := len(h.Sim.Jobs()); n != 0 {
		t.Fatalf("provider jobs before the approver decided = %d, want 0", n)
	}
	ap := newApprover(t, h)
	ap.decide(ap.pending("op-url-task").ID, "approve", `{}`)
	testwait.Until(t, testCtx(t), "the approved task to start its job", func() (bool, error) { return len(h.Sim.Jobs()) == 1, nil })
	if got := approvalsOf(t, h, "op-url-task"); len(got) != 1 || got[0].CreatedBy != ap.credential() {
		t.Fatalf("approvals = %+v; want the approver's", got)
	}
}

// A 2025-11-25 client that takes tasks and declares URL-mode elicitation
// is sent to its approval request's page within the call, then gets its
// task, which waits for the approver and completes once they approve; the
// session hears that the elicitation completed.
func TestURLApprovalOfALegacyTask(t *testing.T) {
	h := harness(t, &fixtures.Options{Config: fixtures.ConfigOptions{Approval: true}})
	urls, completed := make(chan string, 4), make(chan string, 4)
	cs := urlClient(t, h, "2025-11-25", urls, completed)
	task, _, err := taskwire.CallToolAsTask(testCtx(t), cs, fixtures.RunSuiteCall("op-url-legacy", nil), nil)
	if err != nil || task == nil || task.Status != taskwire.StatusWorking {
		t.Fatalf("tools/call = %+v, %v; want a working task", task, err)
	}
	var page string
	select {
	case page = <-urls:
	default:
		t.Fatal("the call returned its task without sending the user to the console")
	}
	if !strings.Contains(page, "/console/requests/") {
		t.Fatalf("the user was sent to %q", page)
	}
	if n := len(h.Sim.Jobs()); n != 0 {
		t.Fatalf("provider jobs before the approver decided = %d, want 0", n)
	}
	ap := newApprover(t, h)
	q := ap.pending("op-url-legacy")
	ap.decide(q.ID, "approve", `{}`)
	if done := awaitTask(t, cs, task.ID); done.Status != taskwire.StatusCompleted {
		t.Fatalf("task after the approval = %s %q", done.Status, done.StatusMessage)
	}
	select {
	case id := <-completed:
		if id != fmt.Sprintf("taskgate-approval-request-%d", q.ID) {
			t.Errorf("notifications/elicitation/complete named %q", id)
		}
	case <-testCtx(t).Done():
		t.Error("no notifications/elicitation/complete")
	}
}
