// Package demo holds the story that `taskgate demo` tells. An agent calls a
// paid tool through taskgate and loses the response; it retries with the
// same operation ID and is attached to the work already running; it retries
// under a new operation ID and is denied; the receipt then accounts for one
// remote job and one charge. As the control, the same client behaviour goes
// straight to the provider, which starts and charges a second job.
//
// Everything runs in this process over real MCP on loopback: a real gateway
// on an embedded SQLite ledger in front of the simulated provider (package
// fixtures' harness), driven by go-sdk clients. The verdict rests on the
// receipt built from the ledger and on the provider's own record; the demo
// also checks that each client got the answer the story says it should and
// that the ledger recorded the expected attempts. It must never reach into
// the gateway's internals to make the story come out right.
package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/taskgate/taskgate/api"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/mcpserver"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/receipt/issue"
	"github.com/taskgate/taskgate/secrets"
	"github.com/taskgate/taskgate/signingkeys"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/sim/providersim"
	"github.com/taskgate/taskgate/taskwire"
)

// The operation the story is about.
const (
	Tenant      = "acme"
	OperationID = "settlement-regression-842"
	// RetryOperationID is the new operation ID a careless retry invents.
	RetryOperationID = OperationID + "-retry"
	// Tool is the paid tool as taskgate lists it.
	Tool = fixtures.RunSuiteTool
)

// Timings. The job runs long enough to be seen; the gateway's own call to
// the provider gives up well before it ends, and so does the agent's first
// call, so that both responses are lost while the job runs.
const (
	jobDuration     = 4 * time.Second
	upstreamTimeout = time.Second
	clientTimeout   = 1500 * time.Millisecond
	approvalExpiry  = 24 * time.Hour
	// Bounds on every wait, so that a misbehaving run ends with a verdict.
	runLimit       = 2 * time.Minute
	resultLimit    = 30 * time.Second
	reconcileLimit = 20 * time.Second
	dotEvery       = 500 * time.Millisecond
	steps          = 8
)

// suiteArguments are the paid tool's arguments, the same in every call.
func suiteArguments() map[string]any {
	return map[string]any{"suite": "settlement", "commit": "4be1c2"}
}

// Options configure Run. The zero value (or nil) runs in a temporary
// directory, prints the whole story and discards logs.
type Options struct {
	// Dir keeps the ledger (taskgate.db) and the gateway's configuration
	// (taskgate.yaml) after the run; it is created if missing and must be
	// empty, so that no earlier operation changes the story. Empty means a
	// temporary directory, removed at the end.
	Dir string
	// Quiet prints only the receipt and the verdict.
	Quiet bool
	// Logger receives the gateway's and the providers' logs; nil discards
	// them.
	Logger *slog.Logger
	// SigningAlgorithm is the algorithm of the key that signs the
	// receipts; empty means Ed25519.
	SigningAlgorithm ledger.SigningAlgorithm
	// Getenv reads the OTEL_* environment, with which the gateway sends
	// the run's traces to an OTLP collector; nil sends none.
	Getenv func(string) string
}

// Outcome is what a run showed.
type Outcome struct {
	// Dir is the kept directory; empty when the run used a temporary one.
	Dir string
	// TaskID is the task the operation was accepted as.
	TaskID string
	// Receipt is the operation's receipt as the ledger had it last.
	Receipt *receipt.Receipt
	// Denial is the error the retry under a new operation ID got; nil if it
	// was not refused.
	Denial *jsonrpc.Error
	// Behind is the record of the provider behind taskgate.
	Behind providersim.Record
	// Control is the record of the provider the control called directly.
	Control providersim.Record
	// Review is what the review packet step showed; nil when it did not run.
	Review *Review
	// Problems lists every way the run departed from the story; the demo
	// passed when it is empty.
	Problems []string
}

// OK reports whether the demo passed: the receipt and both providers'
// records say what the story says they must.
func (o *Outcome) OK() bool { return len(o.Problems) == 0 }

// run is one telling of the story.
type run struct {
	p   *printer
	log *slog.Logger
	// alg is the algorithm of the key that signs the receipts.
	alg   ledger.SigningAlgorithm
	h     *fixtures.Harness
	key   string
	out   *Outcome
	start time.Time
	// sessions are the agents' sessions, closed at the end: an agent whose
	// request timed out keeps its session, so that the cancellation it sends
	// reaches the server.
	sessions []*mcp.ClientSession
	// cs is the retrying agent's session, which uses tasks.
	cs *mcp.ClientSession
	// ring seals the signing key the gateway issues receipts with,
	// signingKey.
	ring       *secrets.Ring
	signingKey *ledger.SigningKey
	// getenv is Options.Getenv; traceparent is the agent's trace, which
	// its calls carry in _meta as an agent that traces does.
	getenv      func(string) string
	traceparent string
	// tmpDir is the directory of a run that keeps nothing, removed at
	// the end.
	tmpDir string
}

// Run tells the story on w and returns what it showed. An error means the
// story could not be told (a port, a directory, a context ended); a story
// that was told but came out wrong is reported in Outcome.Problems.
func Run(ctx context.Context, w io.Writer, opts *Options) (*Outcome, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithTimeout(ctx, runLimit)
	defer cancel()

	if o.SigningAlgorithm == "" {
		o.SigningAlgorithm = ledger.SigningEdDSA
	}
	r := &run{p: &printer{w: w, quiet: o.Quiet}, log: o.Logger, out: &Outcome{}, start: time.Now(), alg: o.SigningAlgorithm,
		getenv: o.Getenv, traceparent: agentTrace()}
	if o.Dir != "" {
		dir, err := prepareDir(o.Dir)
		if err != nil {
			return nil, err
		}
		r.out.Dir = dir
	}
	r.p.line("taskgate demo: a paid tool call whose response is lost, and the retries that follow")
	r.p.line("")
	err := r.setup(ctx)
	if r.tmpDir != "" {
		defer os.RemoveAll(r.tmpDir)
	}
	if err != nil {
		return nil, err
	}
	defer r.h.Close()
	defer func() {
		for _, cs := range r.sessions {
			cs.Close()
		}
	}()
	for _, stage := range []func(context.Context) error{r.firstCall, r.retrySame, r.retryNew, r.awaitResult, r.control, r.review} {
		if err := stage(ctx); err != nil {
			r.p.endLine()
			if ctx.Err() != nil {
				return nil, fmt.Errorf("the demo was stopped before it finished: %w", err)
			}
			return nil, err
		}
	}
	r.out.Problems = append(r.out.Problems, judge(r.out)...)
	r.out.Problems = append(r.out.Problems, reviewProblems(r.out.Review)...)
	r.summary()
	return r.out, nil
}

// prepareDir makes dir ready to keep a ledger in and returns its absolute
// path. A directory that holds anything is refused: an earlier demo's
// ledger would already know the operation.
func prepareDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("demo directory %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return "", fmt.Errorf("create the demo directory: %w", err)
	}
	entries, err := os.ReadDir(abs)
	if err != nil {
		return "", fmt.Errorf("read the demo directory: %w", err)
	}
	if len(entries) > 0 {
		return "", fmt.Errorf("%s is not empty (it holds %s); keep the demo in a new or empty directory", abs, entries[0].Name())
	}
	return abs, nil
}

// problem records a departure from the story and shows it.
func (r *run) problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.out.Problems = append(r.out.Problems, msg)
	r.p.detail("!! %s", msg)
}

// callParams is a run_suite call for operation ID opID, as part of the
// demo's run and of the agent's trace.
func (r *run) callParams(opID string) *mcp.CallToolParams {
	p := fixtures.RunSuiteCall(opID, suiteArguments())
	p.Meta = mcp.Meta{mcpserver.MetaRunID: RunID, "traceparent": r.traceparent}
	return p
}

// agentTrace is a new W3C traceparent: a random trace and span, sampled.
func agentTrace() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return "00-" + hex.EncodeToString(b[:16]) + "-" + hex.EncodeToString(b[16:]) + "-01"
}

// setup starts the provider and the gateway, and creates the tenant's key
// and the approval.
func (r *run) setup(ctx context.Context) error {
	r.p.step(1, "Setup: a gateway on a fresh ledger in front of a simulated paid provider")
	// The secrets key exists before the gateway starts: its worker opens
	// the signing key with it to issue the receipt.
	dir := r.out.Dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "taskgate-demo-")
		if err != nil {
			return fmt.Errorf("create the demo's directory: %w", err)
		}
		dir, r.tmpDir = tmp, tmp
	}
	ring, err := r.signingRing(dir)
	if err != nil {
		return err
	}
	r.ring = ring
	r.h, err = fixtures.New(ctx, &fixtures.Options{
		Dir:    dir,
		Config: fixtures.ConfigOptions{Approval: true, UpstreamTimeout: upstreamTimeout, SecretsKeyFile: filepath.Join(dir, keyFile)},
		Sim: providersim.Options{
			JobDuration: jobDuration,
			Faults:      providersim.Faults{DropResponseAfterAccept: 1},
			Logger:      r.log,
		},
		Logger: r.log,
		Getenv: r.getenv,
	})
	if err != nil {
		return fmt.Errorf("start the gateway and the simulated provider: %w", err)
	}
	if r.key, err = r.h.Key(ctx, Tenant); err != nil {
		r.h.Close()
		return fmt.Errorf("create an API key for tenant %s: %w", Tenant, err)
	}
	if r.signingKey, err = signingkeys.CreateWith(ctx, r.h.Store, ring, r.alg, time.Now()); err != nil {
		r.h.Close()
		return fmt.Errorf("create the demo's receipt-signing key: %w", err)
	}
	terms := api.ApprovalTerms{
		OperationID: OperationID, Tool: Tool, MaxTotalCost: "20.00", MaxRemoteJobs: 1,
		RetryPolicy: "lookup_then_attach", ExpiresIn: approvalExpiry, CreatedBy: "taskgate demo",
	}
	a, err := terms.Approval(Tenant, time.Now())
	if err == nil {
		a, err = r.h.Store.ApprovalCreate(ctx, a)
	}
	if err != nil {
		r.h.Close()
		return fmt.Errorf("record the demo's approval: %w", err)
	}
	where := "a temporary directory, removed at the end"
	if r.out.Dir != "" {
		where = "kept"
	}
	r.p.detail("ledger    %s (embedded SQLite, %s)", r.h.Config.Database, where)
	r.p.detail("provider  hosted_test (simulated) at %s: each job runs %s and is billed %s USD;",
		r.h.SimURL, seconds(jobDuration), providersim.DefaultFinalCharge)
	r.p.detail("          fault drop_response_after_accept=1: it accepts the next run_suite and never answers")
	r.p.detail("gateway   taskgate at %s, giving up on the provider after %s", r.h.MCPURL(), seconds(upstreamTimeout))
	r.p.detail("tenant    %s, API key %s… (only its hash is stored)", Tenant, r.key[:min(len(r.key), 12)])
	if t := r.h.Tracing(); t.On() {
		r.p.detail("traces    sent to %s; the agent's calls carry trace %s", t.Endpoint(), strings.Split(r.traceparent, "-")[1])
	}
	r.p.detail("signing   key %s (Ed25519) issues receipts; its private part is encrypted with the secrets key in %s", r.signingKey.KeyID, keyFile)
	r.p.detail("approval  #%d: %s may run %s as operation %s,", a.ID, a.Tenant, a.Tool, a.OperationID)
	r.p.detail("          up to %s and %d remote job, retry policy %s, expires %s",
		a.MaxTotalCost.Display(), a.MaxRemoteJobs, a.RetryPolicy, a.ExpiresAt.UTC().Format(time.RFC3339))
	return nil
}

// firstCall is the agent's first call: a client without tasks whose
// request times out before the job ends.
func (r *run) firstCall(ctx context.Context) error {
	r.p.step(2, "The agent calls %s as operation %s (no tasks; it gives up after %s)", Tool, OperationID, seconds(clientTimeout))
	cs, err := fixtures.Dial(ctx, r.h.MCPURL(), r.key, fixtures.EraPlain, nil)
	if err != nil {
		return fmt.Errorf("connect the agent to the gateway: %w", err)
	}
	r.sessions = append(r.sessions, cs)
	r.p.detail("arguments %s", compact(suiteArguments()))
	res, took, err := impatientCall(ctx, r.p, cs, r.callParams(OperationID))
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err == nil {
		r.problem("the first call was answered (%s); the story needs its response lost", fixtures.ResultText(res))
		return nil
	}
	r.p.detail("no response after %s: %s", seconds(took), shortError(err))
	r.p.detail("the agent cannot tell whether the suite started, or whether it was charged")
	return nil
}

// retrySame retries with the same operation ID, as a client with tasks.
func (r *run) retrySame(ctx context.Context) error {
	r.p.step(3, "The agent retries with the same operation ID (protocol 2026-07-28 with tasks)")
	var err error
	if r.cs, err = r.h.Connect(ctx, Tenant, fixtures.EraExtension); err != nil {
		return fmt.Errorf("connect the retrying agent to the gateway: %w", err)
	}
	r.sessions = append(r.sessions, r.cs)
	task, res, err := taskwire.CallToolAsTask(ctx, r.cs, r.callParams(OperationID), nil)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	switch {
	case err != nil:
		r.problem("the retry failed: %v", err)
	case task == nil:
		r.problem("the retry was answered without a task: %s", fixtures.ResultText(res))
	default:
		r.out.TaskID = task.ID
	}
	op, err := r.operation(ctx)
	if err != nil {
		return err
	}
	atts, err := r.h.Store.AttemptList(ctx, op.ID)
	if err != nil {
		return fmt.Errorf("read the attempts of %s: %w", OperationID, err)
	}
	if len(atts) == 0 {
		r.problem("the ledger holds no attempts for %s", OperationID)
		return nil
	}
	first, last := atts[0], atts[len(atts)-1]
	r.p.detail("ledger: attempt %s decided %s by the first call, task %s", first.RequestID, first.Decision, op.TaskID)
	if last.Decision == ledger.DecisionAttached {
		r.p.detail("ledger: attempt %s decided %s: no new work, the same task", last.RequestID, last.Decision)
	} else {
		r.problem("the retry (attempt %s) was decided %s, not attached", last.RequestID, last.Decision)
	}
	if r.out.TaskID != "" && r.out.TaskID != op.TaskID {
		r.problem("the retry got task %s, not the operation's task %s", r.out.TaskID, op.TaskID)
	}
	if r.out.TaskID != "" {
		r.p.detail("the agent got task %s back, status %s: %s", task.ID, task.Status, task.StatusMessage)
	}
	return nil
}

// retryNew retries under a new operation ID, which the approval does not
// cover.
func (r *run) retryNew(ctx context.Context) error {
	r.p.step(4, "A retry invents a new operation ID, %s, with the same arguments", RetryOperationID)
	task, res, err := taskwire.CallToolAsTask(ctx, r.cs, r.callParams(RetryOperationID), nil)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var rpcErr *jsonrpc.Error
	switch {
	case err == nil && task != nil:
		r.problem("the retry under a new operation ID was accepted as task %s; the approval allows one remote job", task.ID)
		return nil
	case err == nil:
		r.problem("the retry under a new operation ID was answered (%s); the approval allows one remote job", fixtures.ResultText(res))
		return nil
	case !errors.As(err, &rpcErr):
		r.problem("the retry under a new operation ID failed without a JSON-RPC error: %v", err)
		return nil
	}
	r.out.Denial = rpcErr
	_, reason, _ := fixtures.ErrorReason(rpcErr)
	r.p.detail("denied (JSON-RPC %d): %s → deny_retry; nothing was sent to the provider", rpcErr.Code, reason)
	r.p.detail("message: %s", rpcErr.Message)
	if reason != ledger.ReasonRetryUsesNewOperation {
		r.problem("the denial's reason is %q, not %q", reason, ledger.ReasonRetryUsesNewOperation)
	}
	return nil
}

// awaitResult polls the task until it ends, then waits for the reconciler
// and prints the receipt and the attempt lineage.
func (r *run) awaitResult(ctx context.Context) error {
	r.p.step(5, "The agent waits for the result, polling tasks/get")
	if r.out.TaskID != "" {
		if err := r.pollTask(ctx); err != nil {
			return err
		}
	}
	r.p.detail("the gateway reconciles the operation's remote jobs and charges with the provider")
	stop := r.p.dots(dotEvery)
	rc, op, err := r.awaitReconciled(ctx)
	stop()
	if err != nil {
		return err
	}
	r.out.Receipt = rc
	r.out.Behind = r.h.Sim.Record()
	r.p.detail("%6s  reconciliation %s", seconds(time.Since(r.start)), rc.ReconciliationStatus)
	r.p.detail("what the gateway did, from the ledger's event log:")
	if err := r.events(ctx, op); err != nil {
		return err
	}
	doc, err := rc.YAML()
	if err != nil {
		return err
	}
	r.p.line("")
	r.p.always(strings.TrimRight(string(doc), "\n"))
	r.p.line("")
	r.p.detail("attempt lineage of %s:", OperationID)
	r.p.block(lineageTable(rc.Lineage, op.CreatedAt))
	return nil
}

// pollTask polls tasks/get, printing each new status and a dot otherwise.
// It returns an error only when ctx ends; a task that fails or does not end
// in time is a problem of the run.
func (r *run) pollTask(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, resultLimit)
	defer cancel()
	seen, lastDot := "", time.Now()
	for {
		t, err := taskwire.GetTask(pctx, r.cs, r.out.TaskID)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			r.problem("tasks/get %s: %v", r.out.TaskID, err)
			return nil
		}
		if status := fmt.Sprintf("%s: %s", t.Status, t.StatusMessage); status != seen && !t.Status.IsTerminal() {
			seen = status
			r.p.detail("%6s  %s", seconds(time.Since(r.start)), strings.TrimSuffix(status, ": "))
		} else if time.Since(lastDot) >= dotEvery && !t.Status.IsTerminal() {
			r.p.dot()
			lastDot = time.Now()
		}
		if t.Status.IsTerminal() {
			r.p.detail("%6s  %s, result: %s", seconds(time.Since(r.start)), t.Status, taskOutcome(t))
			if t.Status != taskwire.StatusCompleted {
				r.problem("the task ended %s", t.Status)
			}
			return nil
		}
		wait := t.PollInterval
		if wait <= 0 {
			wait = 100 * time.Millisecond
		}
		select {
		case <-pctx.Done():
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.problem("the task did not end within %s", resultLimit)
			return nil
		case <-time.After(wait):
		}
	}
}

// events prints the operation's event log, one line per event.
func (r *run) events(ctx context.Context, op *ledger.Operation) error {
	evs, err := r.h.Store.EventList(ctx, op.ID)
	if err != nil {
		return fmt.Errorf("read the events of %s: %w", OperationID, err)
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	var lookups []string
	for _, e := range evs {
		fmt.Fprintf(tw, "  +%s\t%s\t%s\n", seconds(e.CreatedAt.Sub(op.CreatedAt)), e.Kind, eventDetail(e.Data))
		if e.Kind != ledger.EventLookup {
			continue
		}
		if l, err := ledger.DecodeEventData[ledger.LookupData](e); err == nil && l.Action != "" {
			job := ""
			if l.RemoteJobID != nil {
				job = *l.RemoteJobID
			}
			lookups = append(lookups, fmt.Sprintf("+%s the provider answered %s for the operation ID, and the gateway chose %s %s",
				seconds(e.CreatedAt.Sub(op.CreatedAt)), l.Answer, l.Action, job))
		}
	}
	tw.Flush()
	r.p.block(b.String())
	if len(lookups) > 0 {
		r.p.detail("the gateway's own call to the provider lost its response too; it looked the operation up before sending anything again:")
		for _, l := range lookups {
			r.p.detail("  %s", l)
		}
	}
	return nil
}

// awaitReconciled reads the receipt from the ledger until the gateway has
// issued it (reconciliation reached a final assessment) or the bound
// passes; it returns the last receipt read, provisional if none was
// issued, and the operation, either way.
func (r *run) awaitReconciled(ctx context.Context) (*receipt.Receipt, *ledger.Operation, error) {
	deadline := time.Now().Add(reconcileLimit)
	for {
		op, err := r.operation(ctx)
		if err != nil {
			return nil, nil, err
		}
		rd, err := issue.Read(ctx, r.h.Store, op, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("read the receipt of %s: %w", OperationID, err)
		}
		if rd.Latest() != nil || time.Now().After(deadline) {
			return rd.Receipt, op, nil
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// operation reads the story's operation from the ledger.
func (r *run) operation(ctx context.Context) (*ledger.Operation, error) {
	op, err := r.h.Store.OperationGet(ctx, &ledger.OperationGetParams{Tenant: Tenant, OperationID: OperationID})
	if err != nil {
		return nil, fmt.Errorf("read operation %s from the ledger: %w", OperationID, err)
	}
	return op, nil
}

// control sends the same client behaviour straight to a fresh provider
// with the same fault: a call that loses its response, then a naive retry
// that carries no shared idempotency key.
func (r *run) control(ctx context.Context) error {
	r.p.step(6, "The control: the same calls straight to the provider, without taskgate")
	sim := providersim.New(&providersim.Options{
		JobDuration: jobDuration,
		Faults:      providersim.Faults{DropResponseAfterAccept: 1},
		Logger:      r.log,
	})
	defer sim.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen for the control's provider: %w", err)
	}
	srv := &http.Server{Handler: sim.HTTPHandler(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/mcp"
	r.p.detail("a fresh hosted_test at %s, same job length, same fault", url)

	call := &mcp.CallToolParams{Name: providersim.ToolRunSuite, Arguments: suiteArguments()}
	first, err := fixtures.Dial(ctx, url, "", fixtures.EraPlain, nil)
	if err != nil {
		return fmt.Errorf("connect the control's agent to the provider: %w", err)
	}
	began := time.Now()
	defer first.Close()
	res, took, err := impatientCall(ctx, r.p, first, call)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err == nil {
		r.problem("the control's first call was answered (%s); the story needs its response lost", fixtures.ResultText(res))
	} else {
		r.p.detail("first call: no response after %s: %s", seconds(took), shortError(err))
	}

	r.p.detail("naive retry: the same arguments, no shared idempotency key, waiting for the result")
	retry, err := fixtures.Dial(ctx, url, "", fixtures.EraPlain, nil)
	if err != nil {
		return fmt.Errorf("connect the control's agent to the provider: %w", err)
	}
	defer retry.Close()
	rctx, cancel := context.WithTimeout(ctx, resultLimit)
	defer cancel()
	stop := r.p.dots(dotEvery)
	res, err = retry.CallTool(rctx, call)
	stop()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		r.problem("the control's retry failed: %v", err)
	} else {
		r.p.detail("retry answered after %s: %s", seconds(time.Since(began)), fixtures.ResultText(res))
	}

	r.p.detail("waiting until every job the provider started has ended")
	stop = r.p.dots(dotEvery)
	rec, err := awaitJobsEnded(ctx, sim)
	stop()
	if err != nil {
		return err
	}
	r.out.Control = rec
	r.p.detail("the provider's own record:")
	r.p.block(recordTable(rec))
	return nil
}

// awaitJobsEnded waits until every job in sim's record has ended, within
// resultLimit, and returns the record.
func awaitJobsEnded(ctx context.Context, sim *providersim.Sim) (providersim.Record, error) {
	deadline := time.Now().Add(resultLimit)
	for {
		rec := sim.Record()
		ended := true
		for _, j := range rec.Jobs {
			ended = ended && j.Status.Terminal()
		}
		if ended || time.Now().After(deadline) {
			return rec, nil
		}
		select {
		case <-ctx.Done():
			return providersim.Record{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// summary compares the two runs and prints the verdict.
func (r *run) summary() {
	o := r.out
	r.p.step(8, "Summary")
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\tremote jobs\tcharged")
	fmt.Fprintf(tw, "without taskgate (the provider's record)\t%d\t%s USD\n", o.Control.Totals.JobsStarted, o.Control.Totals.FinalChargeUSD)
	fmt.Fprintf(tw, "with taskgate (the provider's record)\t%d\t%s USD\n", o.Behind.Totals.JobsStarted, o.Behind.Totals.FinalChargeUSD)
	if rc := o.Receipt; rc != nil {
		fmt.Fprintf(tw, "with taskgate (the receipt)\t%d\t%s USD\n", rc.ObservedRemoteJobs, rc.FinalCostUSD.String())
	}
	tw.Flush()
	r.p.block(b.String())
	if rc := o.Receipt; rc != nil {
		r.p.detail("receipt: observed_remote_jobs: %d, duplicate_jobs: %d, final_cost_usd: %s, reconciliation_status: %s, review_status: %s",
			rc.ObservedRemoteJobs, rc.DuplicateJobs, rc.FinalCostUSD.String(), rc.ReconciliationStatus, rc.ReviewStatus)
	}
	if o.Dir != "" {
		db := r.h.Config.Database
		r.p.detail("kept: the ledger %s and the gateway's configuration %s; inspect them with", db, r.h.ConfigPath)
		r.p.detail("  taskgate --db %s ops show %s", db, OperationID)
		// The receipt was issued once; reading it needs no key.
		r.p.detail("  taskgate --db %s receipt %s --format md", db, OperationID)
	}
	r.p.line("")
	if o.OK() {
		r.p.always(fmt.Sprintf("PASS: one remote job and %s USD with taskgate, where the same client behaviour without it started %d jobs and was charged %s USD",
			o.Receipt.FinalCostUSD.String(), o.Control.Totals.JobsStarted, o.Control.Totals.FinalChargeUSD))
		return
	}
	r.p.always(fmt.Sprintf("FAIL: the run departed from the story in %d way(s):", len(o.Problems)))
	for _, p := range o.Problems {
		r.p.always("  - " + p)
	}
}

// lineageTable prints the attempt lineage with times relative to since.
func lineageTable(lines []receipt.AttemptLine, since time.Time) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tREQUEST\tOPERATION ID\tDECISION\tREASON\tCLIENT\tREMOTE ACCEPTED\tREMOTE EFFECT\tCHARGED")
	for _, a := range lines {
		fmt.Fprintf(tw, "+%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", seconds(a.At.Sub(since)), a.RequestID, a.OperationID, a.Decision,
			dash(a.Reason), a.ClientResult, a.RemoteAccepted, a.RemoteEffect, a.ChargeStatus)
	}
	tw.Flush()
	return b.String()
}

// recordTable prints a provider's record: its jobs, their charges, totals.
func recordTable(rec providersim.Record) string {
	charges := map[string]providersim.Charge{}
	for _, c := range rec.Charges {
		charges[c.JobID] = c
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSTATUS\tIDEMPOTENCY KEY\tCHARGE")
	for _, j := range rec.Jobs {
		charge := "none"
		if c, ok := charges[j.ID]; ok {
			charge = fmt.Sprintf("%s %s %s", c.Amount, c.Currency, c.Status)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", j.ID, j.Status, dash(j.IdempotencyKey), charge)
	}
	fmt.Fprintf(tw, "total: %d jobs\t\t\t%s USD final\n", rec.Totals.JobsStarted, rec.Totals.FinalChargeUSD)
	tw.Flush()
	return b.String()
}

// taskOutcome is a terminal task's result or error in one line.
func taskOutcome(t *taskwire.Task) string {
	if t.Error != nil {
		return t.Error.Message
	}
	var res mcp.CallToolResult
	if len(t.Result) == 0 || json.Unmarshal(t.Result, &res) != nil {
		return "no readable result"
	}
	return fixtures.ResultText(&res)
}

// impatientCall makes a call that gives up after clientTimeout, as an MCP
// client's request timeout does: the SDK stops waiting and tells the server
// with notifications/cancelled. (An http.Client timeout would not end a
// go-sdk call: the interrupted response stream is abandoned silently and
// the call waits on.) It shows dots while it waits.
func impatientCall(ctx context.Context, p *printer, cs *mcp.ClientSession, params *mcp.CallToolParams) (*mcp.CallToolResult, time.Duration, error) {
	cctx, cancel := context.WithTimeout(ctx, clientTimeout)
	defer cancel()
	began := time.Now()
	stop := p.dots(dotEvery / 2)
	res, err := cs.CallTool(cctx, params)
	stop()
	return res, time.Since(began), err
}

// shortError names why a call got no response, without the transport's
// whole chain.
func shortError(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "the client's request timed out"
	}
	return err.Error()
}

// eventDetail is an event's data in one short line.
func eventDetail(data json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(data, &m) != nil || len(m) == 0 {
		return ""
	}
	return compact(m)
}

// compact is v as one line of JSON.
func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
