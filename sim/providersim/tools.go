package providersim

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool names.
const (
	ToolRunSuite        = "run_suite"
	ToolLookupOperation = "lookup_operation"
	ToolGetJob          = "get_job"
	ToolListCharges     = "list_charges"
	ToolCancelJob       = "cancel_job"
	ToolEstimateSuite   = "estimate_suite"
	ToolRunMatrix       = "run_matrix"
	ToolEstimateMatrix  = "estimate_matrix"
)

// MaxMatrixRunners is the most runners one run_matrix call may ask for; the
// fewest is one.
const MaxMatrixRunners = 64

// Where run_suite and run_matrix read an idempotency key besides their
// idempotency_key argument.
const (
	MetaIdempotencyKey   = "com.example.hosted-test/idempotency-key" // a _meta key
	HeaderIdempotencyKey = "Idempotency-Key"                         // an HTTP header
)

// LookupNotFound is lookup_operation's status for a key without a (visible) job.
const LookupNotFound = "not_found"

// RunSuiteArgs are run_suite's arguments.
type RunSuiteArgs struct {
	Suite          string `json:"suite" jsonschema:"name of the test suite to run"`
	Commit         string `json:"commit,omitempty" jsonschema:"commit to test; the default branch head if empty"`
	IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"reuse the same value when retrying: a key that already has a job returns that job instead of starting and charging for another"`
	Token          string `json:"token,omitempty" jsonschema:"a credential the suite's machines use, e.g. for a paid service under test"`
}

// SuiteResult is run_suite's structured result, for a job that ended.
type SuiteResult struct {
	JobID  string    `json:"job_id"`
	Status JobStatus `json:"status"`
	Suite  string    `json:"suite"`
	Passed int       `json:"passed"`
	Failed int       `json:"failed"`
	// ChargeUSD is the job's charge; absent when the job has no charge record.
	ChargeUSD string `json:"charge_usd,omitempty"`
}

// RunMatrixArgs are run_matrix's arguments.
type RunMatrixArgs struct {
	Suite          string `json:"suite" jsonschema:"name of the test suite to run"`
	Runners        int    `json:"runners" jsonschema:"how many runners to start at once, from 1 to 64; each runner is a job billed on its own"`
	Commit         string `json:"commit,omitempty" jsonschema:"commit to test; the default branch head if empty"`
	IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"reuse the same value when retrying: a key that already has jobs returns them instead of starting and charging for another matrix"`
	BrowserGrid    bool   `json:"browser_grid,omitempty" jsonschema:"rent browser time from the browser grid for every runner: each runner then carries a second charge, of kind browser_grid, besides its own"`
}

// MatrixResult is run_matrix's structured result, once every runner ended.
type MatrixResult struct {
	// MatrixID names the matrix (hosted-matrix-1, …). For a key whose jobs
	// were found rather than started it is the matrix of the oldest of them
	// that belongs to one, and empty when none does.
	MatrixID string `json:"matrix_id"`
	Suite    string `json:"suite"`
	// Status is succeeded when every runner succeeded, cancelled when every
	// runner was cancelled, and failed otherwise, also for no runner at all.
	Status JobStatus `json:"status"`
	// Runners are the matrix's jobs, oldest first; never null.
	Runners []RunnerResult `json:"runners"`
}

// RunnerResult is one runner of a [MatrixResult].
type RunnerResult struct {
	JobID  string    `json:"job_id"`
	Status JobStatus `json:"status"`
	// ChargeUSD is the runner's own charge; absent when it has no charge
	// record.
	ChargeUSD string `json:"charge_usd,omitempty"`
	// GridChargeUSD is the runner's browser grid charge; absent when it has
	// none.
	GridChargeUSD string `json:"grid_charge_usd,omitempty"`
}

// EstimateMatrixArgs are estimate_matrix's arguments.
type EstimateMatrixArgs struct {
	Suite       string `json:"suite" jsonschema:"name of the test suite to price"`
	Runners     int    `json:"runners" jsonschema:"how many runners to price, from 1 to 64"`
	BrowserGrid bool   `json:"browser_grid,omitempty" jsonschema:"price the browser grid's charge for every runner too, as run_matrix with browser_grid bills it"`
}

// EstimateMatrixResult is estimate_matrix's structured result: the estimate
// of one job, plus the browser grid's estimate when asked for, times the
// runners asked for.
type EstimateMatrixResult struct {
	EstimateUSD string `json:"estimate_usd"`
	Runners     int    `json:"runners"`
	Currency    string `json:"currency"`
}

// LookupArgs are lookup_operation's arguments.
type LookupArgs struct {
	IdempotencyKey string `json:"idempotency_key" jsonschema:"the idempotency key a run_suite or run_matrix call carried"`
}

// LookupResult is lookup_operation's structured result.
type LookupResult struct {
	// Status is LookupNotFound or the JobStatus of the key's first job.
	Status string `json:"status"`
	// JobID is the key's first job.
	JobID string `json:"job_id,omitempty"`
	// Jobs are all the key's jobs, oldest first.
	Jobs []JobRef `json:"jobs"`
}

// JobRef names one job in a LookupResult.
type JobRef struct {
	JobID     string    `json:"job_id"`
	Status    JobStatus `json:"status"`
	CreatedAt time.Time `json:"created_at"`
}

// JobArgs are get_job's and cancel_job's arguments.
type JobArgs struct {
	JobID string `json:"job_id" jsonschema:"a job ID such as hosted-suite-9912"`
}

// JobInfo is get_job's structured result.
type JobInfo struct {
	JobID  string    `json:"job_id"`
	Status JobStatus `json:"status"`
	Suite  string    `json:"suite"`
	// ChargeUSD and ChargeStatus are the job's own charge; absent when it
	// has no charge record.
	ChargeUSD    string       `json:"charge_usd,omitempty"`
	ChargeStatus ChargeStatus `json:"charge_status,omitempty"`
	// GridChargeUSD and GridChargeStatus are the job's browser grid charge;
	// absent when it has none.
	GridChargeUSD    string       `json:"grid_charge_usd,omitempty"`
	GridChargeStatus ChargeStatus `json:"grid_charge_status,omitempty"`
	// Result is present once the job succeeded or failed.
	Result *JobOutcome `json:"result,omitempty"`
}

// JobOutcome is what a finished suite reported.
type JobOutcome struct {
	Passed int `json:"passed"`
	Failed int `json:"failed"`
}

// ListChargesArgs are list_charges' arguments: exactly one of the two.
type ListChargesArgs struct {
	JobID          string `json:"job_id,omitempty" jsonschema:"list this job's charges"`
	IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"list the charges of every job started with this idempotency key"`
}

// ChargeList is list_charges' structured result.
type ChargeList struct {
	Charges []ChargeInfo `json:"charges"`
}

// ChargeInfo is one charge as list_charges reports it.
type ChargeInfo struct {
	ChargeID string `json:"charge_id"`
	JobID    string `json:"job_id"`
	// Kind is always present: suite, runner or browser_grid.
	Kind      ChargeKind   `json:"kind"`
	AmountUSD string       `json:"amount_usd"`
	Currency  string       `json:"currency"`
	Status    ChargeStatus `json:"status"`
}

// CancelResult is cancel_job's structured result. EffectReversed is true when
// the job was cancelled before it delivered anything, by this call or an
// earlier one, so its charge was refunded; a job that had already succeeded or
// failed is left as it is and answers false.
type CancelResult struct {
	JobID          string    `json:"job_id"`
	Status         JobStatus `json:"status"`
	EffectReversed bool      `json:"effect_reversed"`
	Message        string    `json:"message"`
}

// EstimateArgs are estimate_suite's arguments.
type EstimateArgs struct {
	Suite string `json:"suite" jsonschema:"name of the test suite to price"`
}

// EstimateResult is estimate_suite's structured result.
type EstimateResult struct {
	EstimateUSD string `json:"estimate_usd"`
	Currency    string `json:"currency"`
}

// newServer builds the MCP server: the plain tools, and run_suite as a task
// for clients that use tasks. run_matrix is never a task: one call is several
// jobs.
func (s *Sim) newServer() (*mcp.Server, error) {
	server := mcp.NewServer(&mcp.Implementation{
		Name:    "hosted_test",
		Title:   "Hosted test-suite runner (simulated)",
		Version: "1.0.0",
	}, &mcp.ServerOptions{
		Logger:       s.logger,
		Instructions: "Runs test suites on hosted machines. run_suite is billed per job, and run_matrix starts several runners at once, each billed as a job of its own; with browser_grid every runner also rents browser time from the browser grid, billed as a second charge of kind browser_grid on the same job. Pass idempotency_key and reuse it when retrying, and use lookup_operation before re-sending after a lost response. estimate_suite and estimate_matrix quote the cost first, and list_charges lists every charge of a job with its kind.",
	})
	openWorld, notDestructive := true, false
	mcp.AddTool(server, &mcp.Tool{
		Name:        ToolRunSuite,
		Title:       "Run a test suite (billed)",
		Description: "Starts a billed job that runs a test suite and waits for its result. A call whose idempotency key already has a job returns that job instead of starting another.",
		Annotations: &mcp.ToolAnnotations{
			DestructiveHint: &notDestructive,
			IdempotentHint:  false,
			OpenWorldHint:   &openWorld,
		},
	}, s.runSuite)
	mcp.AddTool(server, &mcp.Tool{
		Name:        ToolLookupOperation,
		Description: "Looks up the jobs started with an idempotency key.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true},
	}, s.lookupOperation)
	mcp.AddTool(server, &mcp.Tool{
		Name:        ToolGetJob,
		Description: "Reports a job's status, its own charge and its browser grid charge if it has one, and, once it ended, its result.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true},
	}, s.getJob)
	mcp.AddTool(server, &mcp.Tool{
		Name:        ToolListCharges,
		Description: "Lists the charges of a job, or of every job started with an idempotency key, each with its kind: suite or runner for the job's own charge, browser_grid for a runner's browser grid charge.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true},
	}, s.listCharges)
	mcp.AddTool(server, &mcp.Tool{
		Name:        ToolCancelJob,
		Description: "Cancels a queued or running job and refunds its pending charges. A job that already ended is left as it is.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &notDestructive, IdempotentHint: true, OpenWorldHint: &openWorld},
	}, s.cancelJob)
	mcp.AddTool(server, &mcp.Tool{
		Name:        ToolEstimateSuite,
		Description: "Quotes what running a suite is estimated to cost.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true},
	}, s.estimateSuite)
	mcp.AddTool(server, &mcp.Tool{
		Name:        ToolRunMatrix,
		Title:       "Run a test suite on several runners (billed per runner)",
		Description: "Starts one billed job per runner (1 to 64) that all run the same suite at once, and waits until every runner has ended. With browser_grid, every runner also rents browser time from the browser grid, billed as a second charge on its job. A call whose idempotency key already has jobs returns those jobs instead of starting another matrix.",
		Annotations: &mcp.ToolAnnotations{
			DestructiveHint: &notDestructive,
			IdempotentHint:  false,
			OpenWorldHint:   &openWorld,
		},
	}, s.runMatrix)
	mcp.AddTool(server, &mcp.Tool{
		Name:        ToolEstimateMatrix,
		Description: "Quotes what running a suite on a number of runners is estimated to cost: one job's estimate per runner, plus the browser grid's estimate per runner with browser_grid.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true},
	}, s.estimateMatrix)
	if err := s.installTasks(server); err != nil {
		return nil, err
	}
	return server, nil
}

// findKey finds a run_suite or run_matrix call's idempotency key: the
// argument, then _meta, then the HTTP header.
func findKey(argument string, meta map[string]any, header http.Header) (string, KeySource) {
	if argument != "" {
		return argument, KeyFromArgument
	}
	if k, ok := meta[MetaIdempotencyKey].(string); ok && k != "" {
		return k, KeyFromMeta
	}
	if k := header.Get(HeaderIdempotencyKey); k != "" {
		return k, KeyFromHeader
	}
	return "", KeyNone
}

// accept starts the job for a run_suite call, or finds the one its key already
// has, and applies the faults that act on the answer: under crash_after_accept
// it calls Options.Crash, and when the answer is to be withheld it waits until
// the caller gives up (or the Sim closes) and returns an error.
func (s *Sim) accept(ctx context.Context, r startRequest) (Job, error) {
	out, err := s.engine.start(r)
	if err != nil {
		return Job{}, err
	}
	if out.Crash {
		s.logger.Warn("crashing after accepting a job (fault crash_after_accept)", "job_id", out.Job.ID)
		s.crash()
	}
	if out.Drop || out.Crash {
		return Job{}, s.withhold(ctx, out.Job.ID)
	}
	return out.Job, nil
}

// acceptMatrix is accept for a run_matrix call: it records a new matrix, or
// finds the jobs its key already has, and applies crash_after_accept and
// drop_response_after_accept to the call as a whole, after every runner is
// recorded.
func (s *Sim) acceptMatrix(ctx context.Context, r matrixRequest) (matrixOutcome, error) {
	out, err := s.engine.startMatrix(r)
	if err != nil {
		return matrixOutcome{}, err
	}
	if out.Crash {
		s.logger.Warn("crashing after accepting a matrix (fault crash_after_accept)", "matrix_id", out.MatrixID, "runners", len(out.Jobs))
		s.crash()
	}
	if out.Drop || out.Crash {
		return matrixOutcome{}, s.withhold(ctx, out.MatrixID)
	}
	return out, nil
}

// withhold keeps an accepted call from being answered: it waits until the
// caller gives up or the Sim closes, then returns the error the caller never
// sees.
func (s *Sim) withhold(ctx context.Context, accepted string) error {
	select {
	case <-ctx.Done():
	case <-s.engine.closing:
	}
	return fmt.Errorf("the response for %s was withheld on purpose by a fault", accepted)
}

func (s *Sim) runSuite(ctx context.Context, req *mcp.CallToolRequest, args RunSuiteArgs) (*mcp.CallToolResult, SuiteResult, error) {
	if strings.TrimSpace(args.Suite) == "" {
		return nil, SuiteResult{}, errors.New("suite must name a test suite, e.g. settlement-regression")
	}
	var header http.Header
	if req.Extra != nil {
		header = req.Extra.Header
	}
	key, source := findKey(args.IdempotencyKey, req.Params.Meta, header)
	accepted, err := s.accept(ctx, startRequest{
		Suite:     args.Suite,
		Commit:    args.Commit,
		Token:     args.Token,
		Key:       key,
		KeySource: source,
		Protocol:  req.ProtocolVersion(),
	})
	if err != nil {
		return nil, SuiteResult{}, err
	}
	job, charges, err := s.engine.wait(ctx, accepted.ID)
	if err != nil {
		return nil, SuiteResult{}, err
	}
	res, out := resultFor(job, charges)
	return res, out, nil
}

// splitCharges picks a job's own charge and its browser grid charge out of
// its charges; either is nil when the job has none.
func splitCharges(charges []Charge) (own, grid *Charge) {
	for i := range charges {
		if charges[i].Kind == ChargeKindBrowserGrid {
			grid = &charges[i]
		} else {
			own = &charges[i]
		}
	}
	return own, grid
}

// resultFor is run_suite's answer for a job that ended: isError unless it
// succeeded. The structured content is left to the caller, which is either
// the SDK's typed handler or the task host.
func resultFor(job Job, charges []Charge) (*mcp.CallToolResult, SuiteResult) {
	out := SuiteResult{
		JobID:  job.ID,
		Status: job.Status,
		Suite:  job.Suite,
		Passed: job.Passed,
		Failed: job.Failed,
	}
	if own, _ := splitCharges(charges); own != nil {
		out.ChargeUSD = own.Amount.String()
	}
	return &mcp.CallToolResult{
		IsError: job.Status != StatusSucceeded,
		Content: []mcp.Content{&mcp.TextContent{Text: summary(job, charges)}},
	}, out
}

// summary is the one-line text of a run_suite result, and of a job as a
// task.
func summary(job Job, charges []Charge) string {
	billed := "no charge recorded"
	if len(charges) > 0 {
		parts := make([]string, 0, len(charges))
		for _, c := range charges {
			name := "charge"
			if c.Kind == ChargeKindBrowserGrid {
				name = "browser grid charge"
			}
			parts = append(parts, fmt.Sprintf("%s %s %s %s", name, c.Amount, c.Currency, c.Status))
		}
		billed = strings.Join(parts, ", ")
	}
	switch job.Status {
	case StatusSucceeded, StatusFailed:
		return fmt.Sprintf("%s %s: suite %s, %d passed, %d failed; %s", job.ID, job.Status, job.Suite, job.Passed, job.Failed, billed)
	case StatusCancelled:
		return fmt.Sprintf("%s cancelled before it delivered a result: suite %s; %s", job.ID, job.Suite, billed)
	default:
		return fmt.Sprintf("%s %s: suite %s; %s", job.ID, job.Status, job.Suite, billed)
	}
}

// checkMatrixArgs checks the arguments run_matrix and estimate_matrix share.
func checkMatrixArgs(suite string, runners int) error {
	if strings.TrimSpace(suite) == "" {
		return errors.New("suite must name a test suite, e.g. settlement-regression")
	}
	if runners < 1 || runners > MaxMatrixRunners {
		return fmt.Errorf("runners must be a whole number from 1 to %d (got %d)", MaxMatrixRunners, runners)
	}
	return nil
}

func (s *Sim) runMatrix(ctx context.Context, req *mcp.CallToolRequest, args RunMatrixArgs) (*mcp.CallToolResult, MatrixResult, error) {
	if err := checkMatrixArgs(args.Suite, args.Runners); err != nil {
		return nil, MatrixResult{}, err
	}
	var header http.Header
	if req.Extra != nil {
		header = req.Extra.Header
	}
	key, source := findKey(args.IdempotencyKey, req.Params.Meta, header)
	accepted, err := s.acceptMatrix(ctx, matrixRequest{
		startRequest: startRequest{
			Suite:     args.Suite,
			Commit:    args.Commit,
			Key:       key,
			KeySource: source,
			Protocol:  req.ProtocolVersion(),
		},
		Runners:     args.Runners,
		BrowserGrid: args.BrowserGrid,
	})
	if err != nil {
		return nil, MatrixResult{}, err
	}
	ended := make([]endedJob, 0, len(accepted.Jobs))
	for _, j := range accepted.Jobs {
		job, charges, err := s.engine.wait(ctx, j.ID)
		if err != nil {
			return nil, MatrixResult{}, err
		}
		ended = append(ended, endedJob{job: job, charges: charges})
	}
	res, out := matrixResultFor(accepted.MatrixID, accepted.Suite, ended)
	return res, out, nil
}

// endedJob is a job that ended, with its charges, own first.
type endedJob struct {
	job     Job
	charges []Charge
}

// matrixResultFor is run_matrix's answer once every runner ended: isError
// unless the matrix succeeded.
func matrixResultFor(matrixID, suite string, runners []endedJob) (*mcp.CallToolResult, MatrixResult) {
	out := MatrixResult{MatrixID: matrixID, Suite: suite, Status: StatusFailed, Runners: make([]RunnerResult, 0, len(runners))}
	byStatus := map[JobStatus]int{}
	for _, r := range runners {
		rr := RunnerResult{JobID: r.job.ID, Status: r.job.Status}
		own, grid := splitCharges(r.charges)
		if own != nil {
			rr.ChargeUSD = own.Amount.String()
		}
		if grid != nil {
			rr.GridChargeUSD = grid.Amount.String()
		}
		out.Runners = append(out.Runners, rr)
		byStatus[r.job.Status]++
	}
	switch n := len(runners); {
	case n > 0 && byStatus[StatusSucceeded] == n:
		out.Status = StatusSucceeded
	case n > 0 && byStatus[StatusCancelled] == n:
		out.Status = StatusCancelled
	}
	return &mcp.CallToolResult{
		IsError: out.Status != StatusSucceeded,
		Content: []mcp.Content{&mcp.TextContent{Text: matrixSummary(out, runners, byStatus)}},
	}, out
}

// matrixSummary is the one-line text of a run_matrix result: the matrix, its
// runners by status, and what they were charged, of which how much for the
// browser grid.
func matrixSummary(m MatrixResult, runners []endedJob, byStatus map[JobStatus]int) string {
	name := m.MatrixID
	if name == "" {
		name = "the key's jobs"
	}
	if len(runners) == 0 {
		return fmt.Sprintf("%s %s: suite %s, no runner started; no charge recorded", name, m.Status, m.Suite)
	}
	var statuses []string
	for _, st := range []JobStatus{StatusSucceeded, StatusFailed, StatusCancelled, StatusRunning, StatusQueued} {
		if n := byStatus[st]; n > 0 {
			statuses = append(statuses, fmt.Sprintf("%d %s", n, st))
		}
	}
	var total, gridTotal Micros
	gridCharges := 0
	byCharge := map[ChargeStatus]int{}
	uncharged := 0
	for _, r := range runners {
		if len(r.charges) == 0 {
			uncharged++
			continue
		}
		for _, c := range r.charges {
			total += c.Amount
			byCharge[c.Status]++
			if c.Kind == ChargeKindBrowserGrid {
				gridTotal += c.Amount
				gridCharges++
			}
		}
	}
	billed := "no charge recorded"
	if uncharged < len(runners) {
		var kinds []string
		for _, st := range []ChargeStatus{ChargeFinal, ChargePending, ChargeRefunded} {
			if n := byCharge[st]; n > 0 {
				kinds = append(kinds, fmt.Sprintf("%d %s", n, st))
			}
		}
		billed = fmt.Sprintf("charges %s %s (%s)", total, Currency, strings.Join(kinds, ", "))
		if gridCharges > 0 {
			billed += fmt.Sprintf(", %s %s of it for the browser grid", gridTotal, Currency)
		}
		if uncharged > 0 {
			billed += fmt.Sprintf(", %s without a charge", countRunners(uncharged))
		}
	}
	return fmt.Sprintf("%s %s: suite %s, %s (%s); %s", name, m.Status, m.Suite, countRunners(len(runners)), strings.Join(statuses, ", "), billed)
}

// countRunners says "1 runner" or "N runners".
func countRunners(n int) string {
	if n == 1 {
		return "1 runner"
	}
	return fmt.Sprintf("%d runners", n)
}

func (s *Sim) lookupOperation(_ context.Context, _ *mcp.CallToolRequest, args LookupArgs) (*mcp.CallToolResult, LookupResult, error) {
	if args.IdempotencyKey == "" {
		return nil, LookupResult{}, errors.New("idempotency_key is empty; pass the key the run_suite or run_matrix call carried")
	}
	jobs, err := s.engine.lookup(args.IdempotencyKey)
	if err != nil {
		return nil, LookupResult{}, err
	}
	result := LookupResult{Status: LookupNotFound, Jobs: []JobRef{}}
	for _, j := range jobs {
		result.Jobs = append(result.Jobs, JobRef{JobID: j.ID, Status: j.Status, CreatedAt: j.CreatedAt})
	}
	if len(jobs) > 0 {
		result.Status, result.JobID = string(jobs[0].Status), jobs[0].ID
	}
	return nil, result, nil
}

func (s *Sim) getJob(_ context.Context, _ *mcp.CallToolRequest, args JobArgs) (*mcp.CallToolResult, JobInfo, error) {
	job, charges, ok := s.engine.job(args.JobID)
	if !ok {
		return nil, JobInfo{}, unknownJobError(args.JobID)
	}
	info := JobInfo{JobID: job.ID, Status: job.Status, Suite: job.Suite}
	own, grid := splitCharges(charges)
	if own != nil {
		info.ChargeUSD, info.ChargeStatus = own.Amount.String(), own.Status
	}
	if grid != nil {
		info.GridChargeUSD, info.GridChargeStatus = grid.Amount.String(), grid.Status
	}
	if job.Status == StatusSucceeded || job.Status == StatusFailed {
		info.Result = &JobOutcome{Passed: job.Passed, Failed: job.Failed}
	}
	return nil, info, nil
}

func (s *Sim) listCharges(_ context.Context, _ *mcp.CallToolRequest, args ListChargesArgs) (*mcp.CallToolResult, ChargeList, error) {
	if (args.JobID == "") == (args.IdempotencyKey == "") {
		return nil, ChargeList{}, errors.New("pass exactly one of job_id or idempotency_key")
	}
	charges, err := s.engine.chargesFor(args.JobID, args.IdempotencyKey)
	if err != nil {
		return nil, ChargeList{}, err
	}
	out := ChargeList{Charges: []ChargeInfo{}}
	for _, c := range charges {
		out.Charges = append(out.Charges, ChargeInfo{
			ChargeID:  c.ID,
			JobID:     c.JobID,
			Kind:      c.Kind,
			AmountUSD: c.Amount.String(),
			Currency:  c.Currency,
			Status:    c.Status,
		})
	}
	return nil, out, nil
}

func (s *Sim) cancelJob(_ context.Context, _ *mcp.CallToolRequest, args JobArgs) (*mcp.CallToolResult, CancelResult, error) {
	out, err := s.engine.cancel(args.JobID)
	if err != nil {
		return nil, CancelResult{}, err
	}
	return nil, CancelResult{
		JobID:          out.Job.ID,
		Status:         out.Job.Status,
		EffectReversed: out.EffectReversed,
		Message:        out.Message,
	}, nil
}

func (s *Sim) estimateSuite(_ context.Context, _ *mcp.CallToolRequest, args EstimateArgs) (*mcp.CallToolResult, EstimateResult, error) {
	if strings.TrimSpace(args.Suite) == "" {
		return nil, EstimateResult{}, errors.New("suite must name a test suite, e.g. settlement-regression")
	}
	return nil, EstimateResult{EstimateUSD: s.engine.estimate.String(), Currency: Currency}, nil
}

func (s *Sim) estimateMatrix(_ context.Context, _ *mcp.CallToolRequest, args EstimateMatrixArgs) (*mcp.CallToolResult, EstimateMatrixResult, error) {
	if err := checkMatrixArgs(args.Suite, args.Runners); err != nil {
		return nil, EstimateMatrixResult{}, err
	}
	perRunner := s.engine.estimate
	if args.BrowserGrid {
		perRunner += s.engine.gridEstimate
	}
	return nil, EstimateMatrixResult{
		EstimateUSD: (Micros(args.Runners) * perRunner).String(),
		Runners:     args.Runners,
		Currency:    Currency,
	}, nil
}
