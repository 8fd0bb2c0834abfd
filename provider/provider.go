// Package provider executes provider contracts: how an operation ID reaches
// the provider that creates the effect, how an operation is looked up by that
// ID, how a job's status, result, charges and cancellation are read, and how
// a lookup answer becomes an action (the "look up, then attach"
// table, in [Decide]), and how a call is priced before it is accepted.
//
// The package reads providers through a [Caller]; it never writes the ledger
// and never decides spend policy. A contract call that fails or answers
// something unmapped is reported as indeterminate (a lookup) or as an error
// (fetch, charges, cancel, estimate), never guessed.
package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/policy"
)

// Caller invokes one tool of the provider's MCP server.
type Caller interface {
	CallTool(ctx context.Context, name string, args map[string]any) (*mcp.CallToolResult, error)
}

// Answer classifies what a provider said about an operation or a job.
type Answer string

const (
	NotFound      Answer = "not_found"
	Accepted      Answer = "accepted"
	Running       Answer = "running"
	Completed     Answer = "completed"
	Failed        Answer = "failed"
	Cancelled     Answer = "cancelled"
	Indeterminate Answer = "indeterminate"
)

// JobStatus maps an answer to the ledger's job status.
func (a Answer) JobStatus() ledger.JobStatus {
	switch a {
	case Accepted:
		return ledger.JobAccepted
	case Running:
		return ledger.JobRunning
	case Completed:
		return ledger.JobCompleted
	case Failed:
		return ledger.JobFailed
	case Cancelled:
		return ledger.JobCancelled
	default:
		return ledger.JobUnknown
	}
}

// Contract is one tool's provider contract.
type Contract struct {
	Upstream string
	Tool     string
	Policy   *config.Tool
	// Declaration is the declared contract (canonical JSON) the contract
	// was adopted from, which an operation accepted under it records; nil
	// for a contract written in the configuration.
	Declaration json.RawMessage
	// Unavailable, when set, says why the tool takes no new call: its
	// declared contract is awaited, missing, invalid or changed. An
	// operation accepted before keeps the contract it recorded.
	Unavailable string
	state       Declaration
}

// New returns the contract of tool on upstream.
func New(upstream, tool string, policy *config.Tool) *Contract {
	return &Contract{Upstream: upstream, Tool: tool, Policy: policy}
}

func (c *Contract) spec() *config.Contract { return &c.Policy.Contract }

// Send is an upstream call prepared to carry the operation ID.
type Send struct {
	Arguments map[string]any
	Meta      map[string]any
	Header    http.Header
}

// PrepareSend places the operation ID where the provider contract says the
// provider reads it: an argument, a _meta key or an HTTP header.
func (c *Contract) PrepareSend(arguments json.RawMessage, operationID string) (*Send, error) {
	args, err := decodeArguments(arguments)
	if err != nil {
		return nil, err
	}
	s := &Send{Arguments: args}
	k := c.spec().Key
	switch {
	case k.Argument != "":
		s.Arguments[k.Argument] = operationID
	case k.Meta != "":
		s.Meta = map[string]any{k.Meta: operationID}
	case k.Header != "":
		s.Header = http.Header{}
		s.Header.Set(k.Header, operationID)
	}
	return s, nil
}

// KeyArgument is the argument in which PrepareSend places the key; empty
// when the key travels another way or not at all. A client's value in it
// is never the one sent.
func (c *Contract) KeyArgument() string { return c.spec().Key.Argument }

func decodeArguments(raw json.RawMessage) (map[string]any, error) {
	args := map[string]any{}
	if len(raw) == 0 {
		return args, nil
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&args); err != nil {
		return nil, fmt.Errorf("tool arguments are not a JSON object: %w", err)
	}
	if args == nil {
		args = map[string]any{}
	}
	return args, nil
}

// RemoteJobID reads the remote job ID from a call's result, if the
// contract names where it is.
func (c *Contract) RemoteJobID(res *mcp.CallToolResult) string {
	f := c.spec().RemoteJobIDField
	if f == "" || res == nil {
		return ""
	}
	s, _ := field(structured(res), f).(string)
	return s
}

// RemoteJobIDs reads every remote job a call's result names: the list at
// remote_jobs_field (job IDs, or objects with the ID at
// remote_job_id_field, default job_id), or else the one job at
// remote_job_id_field. Jobs are in the result's order, each once.
func (c *Contract) RemoteJobIDs(res *mcp.CallToolResult) []string {
	spec := c.spec()
	if spec.RemoteJobsField == "" || res == nil {
		if id := c.RemoteJobID(res); id != "" {
			return []string{id}
		}
		return nil
	}
	list, _ := field(structured(res), spec.RemoteJobsField).([]any)
	var out []string
	for _, item := range list {
		var id string
		switch x := item.(type) {
		case string:
			id = x
		case map[string]any:
			id, _ = field(x, cmpOr(spec.RemoteJobIDField, "job_id")).(string)
		}
		if id != "" && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// LookupResult is what a lookup found.
type LookupResult struct {
	Answer Answer
	// RemoteJobID is the job the provider associates with the operation ID.
	RemoteJobID string
	// Jobs is every job the provider holds for the operation ID, when the
	// contract can list them.
	Jobs []JobRef
	// Detail explains an indeterminate answer.
	Detail string
	// CallFailed means the lookup itself failed (unreachable provider, an
	// error answer), as opposed to an answer the contract cannot map.
	CallFailed bool
	// Record is the lookup's answer as the provider returned it.
	Record json.RawMessage
}

// answerFor is what the lookup says of job jobID: its own entry when the
// lookup lists it (the first job's answer is not another job's);
// otherwise the answer, which is the first job's, as for a job the
// provider knows by another name (an upstream task's ID).
func (l *LookupResult) answerFor(jobID string) Answer {
	for _, j := range l.Jobs {
		if j.ID == jobID {
			return j.Answer
		}
	}
	return l.Answer
}

// JobRef is one job in a lookup's list.
type JobRef struct {
	ID     string
	Answer Answer
}

// CanLookup reports whether the contract can look an operation up.
func (c *Contract) CanLookup() bool { return c.spec().Lookup != nil }

// Lookup asks the provider what it knows of operationID. It never returns
// an error: a failed or unreadable lookup is Indeterminate, with Detail.
func (c *Contract) Lookup(ctx context.Context, caller Caller, operationID string, arguments json.RawMessage) *LookupResult {
	l := c.spec().Lookup
	if l == nil {
		return &LookupResult{Answer: Indeterminate, Detail: "the provider contract defines no lookup"}
	}
	res, err := c.call(ctx, caller, l.Call, vars{operationID: operationID, arguments: arguments})
	if err != nil {
		return &LookupResult{Answer: Indeterminate, Detail: err.Error(), CallFailed: true}
	}
	sc := structured(res)
	status, _ := field(sc, l.StatusField).(string)
	out := &LookupResult{Answer: classify(l.Statuses, status), Record: record(res)}
	if l.RemoteJobIDField != "" {
		out.RemoteJobID, _ = field(sc, l.RemoteJobIDField).(string)
	}
	if l.JobsField != "" {
		list, _ := field(sc, l.JobsField).([]any)
		for _, item := range list {
			m, _ := item.(map[string]any)
			id, _ := field(m, cmpOr(l.RemoteJobIDField, "job_id")).(string)
			st, _ := field(m, l.StatusField).(string)
			if id != "" {
				out.Jobs = append(out.Jobs, JobRef{ID: id, Answer: classify(l.Statuses, st)})
			}
		}
	}
	if out.Answer == Indeterminate {
		out.Detail = fmt.Sprintf("lookup answered status %q, which the contract does not map", status)
	}
	if out.RemoteJobID == "" && len(out.Jobs) > 0 {
		out.RemoteJobID = out.Jobs[0].ID
	}
	return out
}

// FetchResult is a job's status and, once completed, its result.
type FetchResult struct {
	Answer Answer
	Result *mcp.CallToolResult
	// Record is the provider's answer as it returned it (its structured
	// content), and Tool the contract tool that gave it: the evidence of
	// the job's status.
	Record json.RawMessage
	Tool   string
}

// CanFetch reports whether the contract can read a job by its ID.
func (c *Contract) CanFetch() bool { return c.spec().Fetch != nil }

// Fetch reads job jobID. Without a fetch tool it falls back to a lookup by
// operation ID, which gives the job's status (its own entry when the lookup
// lists the jobs) but no result.
func (c *Contract) Fetch(ctx context.Context, caller Caller, jobID, operationID string, arguments json.RawMessage) (*FetchResult, error) {
	f := c.spec().Fetch
	if f == nil {
		l := c.Lookup(ctx, caller, operationID, arguments)
		if l.Answer == Indeterminate {
			return nil, errors.New(l.Detail)
		}
		return &FetchResult{Answer: l.answerFor(jobID), Record: l.Record, Tool: c.spec().Lookup.Tool}, nil
	}
	res, err := c.call(ctx, caller, f.Call, vars{operationID: operationID, jobID: jobID, arguments: arguments})
	if err != nil {
		return nil, err
	}
	status, _ := field(structured(res), f.StatusField).(string)
	a := classify(f.Statuses, status)
	if a == Indeterminate {
		return nil, fmt.Errorf("fetch of job %s answered status %q, which the contract does not map", jobID, status)
	}
	return &FetchResult{Answer: a, Result: res, Record: record(res), Tool: f.Tool}, nil
}

// record is a contract tool's answer as the provider returned it: its
// structured content, or the JSON object its text holds; nil when it has
// neither.
func record(res *mcp.CallToolResult) json.RawMessage {
	sc := structured(res)
	if sc == nil {
		return nil
	}
	b, err := json.Marshal(sc)
	if err != nil {
		return nil
	}
	return b
}

// Charge is one charge as the provider reports it.
type Charge struct {
	ID          string
	RemoteJobID string
	Amount      money.Amount
	Status      ledger.ChargeStatus
	// Kind is what the provider calls the charge; empty when the contract
	// names no kind_field or the charge has none.
	Kind string
}

// Priced reports whether the contract can read charges.
func (c *Contract) Priced() bool { return c.spec().Charges != nil }

// ChargeList is what a charges call answered.
type ChargeList struct {
	Charges []Charge
	// Record is the answer as the provider returned it, and Tool the
	// contract tool that gave it: the evidence of the job's charges.
	Record json.RawMessage
	Tool   string
}

// Charges lists the charges of job jobID.
func (c *Contract) Charges(ctx context.Context, caller Caller, jobID, operationID string, arguments json.RawMessage) (*ChargeList, error) {
	ch := c.spec().Charges
	if ch == nil {
		return &ChargeList{}, nil
	}
	res, err := c.call(ctx, caller, ch.Call, vars{operationID: operationID, jobID: jobID, arguments: arguments})
	if err != nil {
		return nil, err
	}
	list, err := c.readCharges(res, jobID)
	if err != nil {
		return nil, err
	}
	return &ChargeList{Charges: list, Record: record(res), Tool: ch.Tool}, nil
}

// readCharges reads the charges in a charges call's answer.
func (c *Contract) readCharges(res *mcp.CallToolResult, jobID string) ([]Charge, error) {
	ch := c.spec().Charges
	list, ok := field(structured(res), ch.ListField).([]any)
	if !ok && field(structured(res), ch.ListField) != nil {
		return nil, fmt.Errorf("charges field %q is not a list", ch.ListField)
	}
	var out []Charge
	for i, item := range list {
		m, _ := item.(map[string]any)
		id, _ := field(m, ch.IDField).(string)
		amountText := decimalText(field(m, ch.AmountField))
		currency := c.spec().Cost.Currency
		if ch.CurrencyField != "" {
			if cur, _ := field(m, ch.CurrencyField).(string); cur != "" {
				currency = cur
			}
		}
		amount, err := money.Parse(amountText, currency)
		if err != nil {
			return nil, fmt.Errorf("charge %d (%q): amount: %w", i, id, err)
		}
		status, _ := field(m, ch.StatusField).(string)
		cs, err := chargeStatus(ch.Statuses, status)
		if err != nil {
			return nil, fmt.Errorf("charge %q: %w", id, err)
		}
		job := jobID
		if ch.RemoteJobIDField != "" {
			if j, _ := field(m, ch.RemoteJobIDField).(string); j != "" {
				job = j
			}
		}
		if id == "" {
			return nil, fmt.Errorf("charge %d has no %q", i, ch.IDField)
		}
		c := Charge{ID: id, RemoteJobID: job, Amount: amount, Status: cs}
		if ch.KindField != "" {
			c.Kind, _ = field(m, ch.KindField).(string)
		}
		out = append(out, c)
	}
	return out, nil
}

func chargeStatus(m map[string][]string, status string) (ledger.ChargeStatus, error) {
	if len(m) == 0 {
		switch ledger.ChargeStatus(status) {
		case ledger.ChargePending, ledger.ChargeFinal, ledger.ChargeRefunded:
			return ledger.ChargeStatus(status), nil
		}
	}
	for class, values := range m {
		for _, v := range values {
			if v == status {
				return ledger.ChargeStatus(class), nil
			}
		}
	}
	return "", fmt.Errorf("status %q is not mapped to pending, final or refunded", status)
}

// CancelResult is what a cancellation achieved.
type CancelResult struct {
	EffectReversed ledger.Knowledge
	Detail         string
}

// CanCancel reports whether the contract can cancel a job.
func (c *Contract) CanCancel() bool { return c.spec().Cancel != nil }

// Cancel asks the provider to cancel job jobID.
func (c *Contract) Cancel(ctx context.Context, caller Caller, jobID, operationID string, arguments json.RawMessage) (*CancelResult, error) {
	cn := c.spec().Cancel
	if cn == nil {
		return nil, errors.New("the provider contract defines no cancel")
	}
	res, err := c.call(ctx, caller, cn.Call, vars{operationID: operationID, jobID: jobID, arguments: arguments})
	if err != nil {
		return nil, err
	}
	out := &CancelResult{EffectReversed: ledger.Unknown, Detail: text(res)}
	if cn.EffectReversedField != "" {
		switch field(structured(res), cn.EffectReversedField) {
		case true:
			out.EffectReversed = ledger.Yes
		case false:
			out.EffectReversed = ledger.No
		}
	}
	if m, _ := field(structured(res), "message").(string); m != "" {
		out.Detail = m
	}
	return out, nil
}

// Route prices a call before it is sent: how many remote jobs it would
// start and their estimated total, from the contract's cost (a fixed
// estimate, a fixed estimate per job, or the provider's estimate tool) and
// the call's arguments. A call that cannot be priced is an error.
func (c *Contract) Route(ctx context.Context, caller Caller, arguments json.RawMessage) (policy.Route, error) {
	cost := c.spec().Cost
	args, err := decodeArguments(arguments)
	if err != nil {
		return policy.Route{}, err
	}
	var answer map[string]any
	if et := cost.EstimateTool; et != nil {
		call := et.Call
		if len(call.Arguments) == 0 {
			call.Arguments = args
		}
		res, err := c.call(ctx, caller, call, vars{arguments: arguments})
		if err != nil {
			return policy.Route{}, fmt.Errorf("price the call with %s: %w", et.Tool, err)
		}
		if answer = structured(res); answer == nil {
			answer = map[string]any{}
		}
	}
	return route(&cost, args, answer)
}

// route is the route of a call with arguments args under cost; answer is
// the estimate tool's structured answer, when cost has one.
func route(cost *config.Cost, args, answer map[string]any) (policy.Route, error) {
	r := policy.Route{RemoteJobs: 1, Estimate: money.Zero(cost.Currency)}
	switch et := cost.EstimateTool; {
	case cost.JobsArgument != "":
		n, err := jobCount(args[cost.JobsArgument])
		if err != nil {
			return policy.Route{}, fmt.Errorf("argument %q counts the remote jobs this call starts: %w", cost.JobsArgument, err)
		}
		r.RemoteJobs = n
	case et != nil && et.JobsField != "":
		n, err := jobCount(field(answer, et.JobsField))
		if err != nil {
			return policy.Route{}, fmt.Errorf("price the call with %s: its answer's %q counts the remote jobs the call would start: %w", et.Tool, et.JobsField, err)
		}
		r.RemoteJobs = n
	}
	switch et := cost.EstimateTool; {
	case cost.Estimate != nil:
		r.Estimate = *cost.Estimate
	case cost.EstimatePerJob != nil:
		total, err := cost.EstimatePerJob.Times(r.RemoteJobs)
		if err != nil {
			return policy.Route{}, fmt.Errorf("price %d remote jobs at %s each: %w", r.RemoteJobs, cost.EstimatePerJob.Display(), err)
		}
		r.Estimate = total
	case et != nil:
		v := field(answer, et.Field)
		if v == nil {
			return policy.Route{}, fmt.Errorf("price the call with %s: its answer has no %q", et.Tool, et.Field)
		}
		estimate, err := money.Parse(decimalText(v), cost.Currency)
		if err != nil {
			return policy.Route{}, fmt.Errorf("price the call with %s: %w", et.Tool, err)
		}
		r.Estimate = estimate
	}
	return r, nil
}

// jobCount reads a count of remote jobs: a whole number of at least 1.
func jobCount(v any) (int, error) {
	var n int64
	var err error
	switch x := v.(type) {
	case json.Number:
		n, err = x.Int64()
	case float64:
		n = int64(x)
		if float64(n) != x {
			err = errors.New("not a whole number")
		}
	case nil:
		return 0, errors.New("it is missing; give a whole number of at least 1")
	case string:
		return 0, fmt.Errorf("it is a string (%q), not a number", x)
	default:
		return 0, fmt.Errorf("it is a %T, not a number", v)
	}
	if err != nil || n < 1 || n > math.MaxInt32 {
		return 0, fmt.Errorf("it must be a whole number of at least 1, not %v", v)
	}
	return int(n), nil
}

// decimalText is an amount field as decimal text: a JSON number read as a
// float64 is printed in plain notation (fmt would print 2e+07), so that
// money.Parse reads the number the provider wrote or rejects it.
func decimalText(v any) string {
	switch n := v.(type) {
	case float64:
		return strconv.FormatFloat(n, 'f', -1, 64)
	case json.Number:
		return n.String()
	case string:
		return n
	default:
		return fmt.Sprint(v)
	}
}

// vars are the values a contract call's placeholders take.
type vars struct {
	operationID, jobID string
	arguments          json.RawMessage
}

// call runs one contract call; a tool error result is an error.
func (c *Contract) call(ctx context.Context, caller Caller, call config.Call, v vars) (*mcp.CallToolResult, error) {
	args, err := render(call.Arguments, v)
	if err != nil {
		return nil, err
	}
	res, err := caller.CallTool(ctx, call.Tool, args)
	if err != nil {
		return nil, fmt.Errorf("%s on %s: %w", call.Tool, c.Upstream, err)
	}
	if res.IsError {
		return nil, fmt.Errorf("%s on %s answered an error: %s", call.Tool, c.Upstream, text(res))
	}
	return res, nil
}

// render substitutes placeholders in a call's argument template.
func render(tmpl map[string]any, v vars) (map[string]any, error) {
	out := maps.Clone(tmpl)
	if out == nil {
		out = map[string]any{}
	}
	var original map[string]any
	for k, val := range out {
		s, ok := val.(string)
		if !ok {
			continue
		}
		switch {
		case s == "{operation_id}":
			out[k] = v.operationID
		case s == "{remote_job_id}":
			if v.jobID == "" {
				return nil, fmt.Errorf("argument %q needs a remote job ID and none is known yet", k)
			}
			out[k] = v.jobID
		case strings.HasPrefix(s, "{argument:") && strings.HasSuffix(s, "}"):
			if original == nil {
				var err error
				if original, err = decodeArguments(v.arguments); err != nil {
					return nil, err
				}
			}
			out[k] = original[strings.TrimSuffix(strings.TrimPrefix(s, "{argument:"), "}")]
		}
	}
	return out, nil
}

// classify maps a provider status to an answer; unmapped is indeterminate.
func classify(m map[string][]string, status string) Answer {
	for class, values := range m {
		for _, v := range values {
			if v == status {
				return Answer(class)
			}
		}
	}
	return Indeterminate
}

// structured returns a result's structured content as an object, falling
// back to a JSON object in its first text block.
func structured(res *mcp.CallToolResult) map[string]any {
	if res == nil {
		return nil
	}
	switch sc := res.StructuredContent.(type) {
	case map[string]any:
		return sc
	case json.RawMessage:
		var m map[string]any
		if json.Unmarshal(sc, &m) == nil {
			return m
		}
	case nil:
	default:
		b, err := json.Marshal(sc)
		var m map[string]any
		if err == nil && json.Unmarshal(b, &m) == nil {
			return m
		}
	}
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			var m map[string]any
			if json.Unmarshal([]byte(t.Text), &m) == nil {
				return m
			}
		}
	}
	return nil
}

// field reads a dotted path ("a.b") from an object.
func field(m map[string]any, path string) any {
	var cur any = m
	for _, part := range strings.Split(path, ".") {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = obj[part]
	}
	return cur
}

// text is a result's text content, for messages.
func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, " ")
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
