package providerkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// jobView is a job as the paid tool and get_job answer with it.
type jobView struct {
	JobID  string `json:"job_id"`
	Status Status `json:"status"`
	Result any    `json:"result,omitempty" jsonschema:"the work's result, once the job completed"`
	Error  string `json:"error,omitempty" jsonschema:"why the job failed or was cancelled"`
}

func viewOf(j *Job) jobView {
	v := jobView{JobID: j.ID, Status: j.Status, Error: j.Error}
	if len(j.Result) > 0 {
		v.Result = j.Result
	}
	return v
}

// jobResult is the answer of a call whose job has ended.
func jobResult(j *Job) *mcp.CallToolResult {
	v := viewOf(j)
	text, _ := json.Marshal(v)
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: string(text)}},
		StructuredContent: v,
		IsError:           j.Status != StatusCompleted,
	}
}

// jobSchema is the output schema of a paid tool: the job, with the
// author's output schema, if any, as its result.
func jobSchema(result any) map[string]any {
	if result == nil {
		result = map[string]any{}
	}
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"job_id": map[string]any{"type": "string"},
			"status": map[string]any{"type": "string", "enum": []string{string(StatusRunning), string(StatusCompleted), string(StatusFailed), string(StatusCancelled)}},
			"result": result,
			"error":  map[string]any{"type": "string"},
		},
		"required": []string{"job_id", "status"},
	}
}

type keyArgs struct {
	IdempotencyKey string `json:"idempotency_key" jsonschema:"the idempotency key the call was sent with"`
}

type jobArgs struct {
	JobID string `json:"job_id" jsonschema:"the job's ID"`
}

type jobRef struct {
	JobID  string `json:"job_id"`
	Status Status `json:"status"`
}

type lookupAnswer struct {
	Status Status   `json:"status" jsonschema:"not_found, or the status of the key's first job"`
	JobID  string   `json:"job_id,omitempty"`
	Jobs   []jobRef `json:"jobs" jsonschema:"every job of the key"`
}

type chargeView struct {
	ChargeID string       `json:"charge_id"`
	JobID    string       `json:"job_id"`
	Amount   string       `json:"amount" jsonschema:"a decimal string, never a float"`
	Currency string       `json:"currency"`
	Kind     string       `json:"kind,omitempty"`
	Status   ChargeStatus `json:"status"`
}

type chargesAnswer struct {
	Charges []chargeView `json:"charges"`
}

type estimateAnswer struct {
	Estimate string `json:"estimate" jsonschema:"a decimal string, never a float"`
	Currency string `json:"currency"`
}

// addContractTools adds lookup_operation, get_job, list_charges and
// cancel_job to s.
func (k *Kit) addContractTools(s *mcp.Server) {
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}
	mcp.AddTool(s, &mcp.Tool{
		Name:        LookupTool,
		Description: "What this server knows of an idempotency key: not_found, or its job and the job's status.",
		Annotations: readOnly,
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in keyArgs) (*mcp.CallToolResult, lookupAnswer, error) {
		if in.IdempotencyKey == "" {
			return nil, lookupAnswer{}, errors.New("idempotency_key is required")
		}
		jobs, err := k.store.JobsByKey(ctx, in.IdempotencyKey)
		if err != nil {
			return nil, lookupAnswer{}, fmt.Errorf("look up the key: %w", err)
		}
		out := lookupAnswer{Status: statusNotFound, Jobs: []jobRef{}}
		for _, j := range jobs {
			out.Jobs = append(out.Jobs, jobRef{JobID: j.ID, Status: j.Status})
		}
		if len(jobs) > 0 {
			out.Status, out.JobID = jobs[0].Status, jobs[0].ID
		}
		return nil, out, nil
	})
	mcp.AddTool(s, &mcp.Tool{
		Name:        GetJobTool,
		Description: "A job's status and, once it completed, its result.",
		Annotations: readOnly,
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in jobArgs) (*mcp.CallToolResult, jobView, error) {
		j, err := k.store.Job(ctx, in.JobID)
		if err != nil {
			return nil, jobView{}, fmt.Errorf("job %q: %w", in.JobID, err)
		}
		return nil, viewOf(j), nil
	})
	mcp.AddTool(s, &mcp.Tool{
		Name:        ListChargesTool,
		Description: "A job's charges, each with its amount as a decimal string, currency, kind and status (pending, final or refunded).",
		Annotations: readOnly,
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in jobArgs) (*mcp.CallToolResult, chargesAnswer, error) {
		if _, err := k.store.Job(ctx, in.JobID); err != nil {
			return nil, chargesAnswer{}, fmt.Errorf("job %q: %w", in.JobID, err)
		}
		charges, err := k.store.Charges(ctx, in.JobID)
		if err != nil {
			return nil, chargesAnswer{}, fmt.Errorf("list the charges of job %q: %w", in.JobID, err)
		}
		out := chargesAnswer{Charges: []chargeView{}}
		for _, c := range charges {
			out.Charges = append(out.Charges, chargeView{
				ChargeID: c.ID, JobID: c.JobID, Amount: c.Amount.String(), Currency: c.Amount.Currency, Kind: c.Kind, Status: c.Status,
			})
		}
		return nil, out, nil
	})
	mcp.AddTool(s, &mcp.Tool{
		Name:        CancelJobTool,
		Description: "Cancels a job that has not ended; a job that ended stays as it was.",
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true},
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in jobArgs) (*mcp.CallToolResult, jobView, error) {
		j, err := k.cancel(ctx, in.JobID)
		if err != nil {
			return nil, jobView{}, fmt.Errorf("cancel job %q: %w", in.JobID, err)
		}
		return nil, viewOf(j), nil
	})
}

// addEstimate adds estimate_TOOL, which prices a call of t from the same
// arguments.
func (k *Kit) addEstimate(s *mcp.Server, t *mcp.Tool, p *Paid) {
	s.AddTool(&mcp.Tool{
		Name:        EstimateToolPrefix + t.Name,
		Description: fmt.Sprintf("What a call of %s with these arguments is expected to cost, before it runs.", t.Name),
		InputSchema: t.InputSchema,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true},
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		amount, err := p.EstimateFunc(ctx, req.Params.Arguments)
		if err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "cannot price this call: " + err.Error()}}}, nil
		}
		out := estimateAnswer{Estimate: amount.String(), Currency: amount.Currency}
		text, _ := json.Marshal(out)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}, StructuredContent: out}, nil
	})
}
