package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/internal/daemon"
	"github.com/taskgate/taskgate/internal/dburl"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/provider"
	"github.com/taskgate/taskgate/providersim"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/upstream"
	"github.com/taskgate/taskgate/worker"
)

// loadConfig reads the configuration; --db, or TASKGATE_DB, overrides its
// database.
func (e *env) loadConfig(cmd *cobra.Command, path string) (*config.Config, error) {
	if path == "" {
		return nil, &usageError{msg: "--config is required", hint: cmd.CommandPath() + " --config taskgate.yaml (see config/taskgate.example.yaml)"}
	}
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	if cmd.Flags().Changed("db") || e.getenv("TASKGATE_DB") != "" {
		cfg.Database = e.db
	}
	return cfg, nil
}

// verbose makes long-running commands log at info unless told otherwise.
func (e *env) verbose() {
	if e.logLevel == "" {
		e.logLevel = "info"
	}
}

func (e *env) serveCmd() *cobra.Command {
	var (
		cfgPath  string
		listen   string
		stdio    bool
		noWorker bool
	)
	cmd := &cobra.Command{
		Use:   "serve --config taskgate.yaml",
		Short: "Run the gateway: MCP over Streamable HTTP at /mcp, or over stdio with --stdio",
		Long: "serve applies pending ledger migrations, connects every upstream (starting and supervising stdio\n" +
			"upstreams), starts the background worker (unless --no-worker) and serves MCP over\n" +
			"Streamable HTTP at /mcp, with /healthz, /readyz, /metrics, the approvals API at /v1/approvals and\n" +
			"receipts at /v1/operations/{id}/receipt on the same listener. With --stdio it serves one local\n" +
			"client on stdin/stdout instead, as the configuration's auth.stdio_tenant.\n\n" +
			"The ledger is the configuration's database unless --db or TASKGATE_DB names another. The first\n" +
			"SIGINT or SIGTERM stops taking requests and lets in-flight ones finish. serve sets GOGC=400 unless\n" +
			"GOGC is set. See config/taskgate.example.yaml for every configuration field.",
		Example: "  taskgate serve --config taskgate.yaml\n  taskgate serve --config taskgate.yaml --listen 127.0.0.1:9000\n  taskgate serve --config taskgate.yaml --stdio",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e.verbose()
			cfg, err := e.loadConfig(cmd, cfgPath)
			if err != nil {
				return err
			}
			if listen != "" {
				if !strings.Contains(cfg.PublicURL, listen) && cfg.PublicURL == "http://"+cfg.Listen {
					cfg.PublicURL = "http://" + listen
				}
				cfg.Listen = listen
			}
			log := e.logger()
			gc := daemon.TuneGC(e.getenv)
			ctx := cmd.Context()
			log.Info("starting", "gogc", gc)
			d, err := daemon.Start(ctx, &daemon.Options{Config: cfg, Logger: log, NoHTTP: stdio, NoWorker: noWorker})
			if err != nil {
				return err
			}
			defer func() {
				sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
				defer cancel()
				if err := d.Stop(sctx); err != nil {
					log.Warn("shutdown", "err", err)
				}
			}()
			if stdio {
				return d.ServeStdio(ctx, e.stdin, e.stdout)
			}
			fmt.Fprintf(e.stderr, "taskgate serving MCP at %s/mcp (ledger %s)\n", d.URL, dburl.Describe(cfg.Database))
			<-ctx.Done()
			fmt.Fprintln(e.stderr, "taskgate shutting down: finishing in-flight requests")
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "the configuration file (YAML)")
	cmd.Flags().StringVar(&listen, "listen", "", "override the configuration's listen address")
	cmd.Flags().BoolVar(&stdio, "stdio", false, "serve one local client on stdin/stdout, as the configured stdio tenant")
	cmd.Flags().BoolVar(&noWorker, "no-worker", false, "run no background worker: accept and enqueue only, for a replica beside others that run it (PostgreSQL only)")
	return cmd
}

func (e *env) providerSimCmd() *cobra.Command {
	var (
		listen   string
		faults   []string
		stdio    bool
		state    string
		duration time.Duration
	)
	cmd := &cobra.Command{
		Use:   "provider-sim [--listen 127.0.0.1:8940] [--fault NAME[=VALUE]]...",
		Short: "Run the simulated paid provider (hosted_test) on its own",
		Long: "Runs providersim, a simulated hosted test-suite provider, as an MCP server: Streamable HTTP at /mcp\n" +
			"with its own record of jobs and charges at /sim/record, or stdio with --stdio. It offers run_suite\n" +
			"(billed per job, honouring an idempotency key), lookup_operation, get_job, list_charges, cancel_job\n" +
			"and estimate_suite. config/taskgate.example.yaml points at it.\n\n" +
			"Faults (--fault, repeatable):\n" +
			"  drop_response_after_accept[=N]  accept the next N (default 1) run_suite calls, then never answer\n" +
			"  ignore_idempotency_key          every run_suite starts a new job, whatever its key\n" +
			"  lookup_indeterminate            lookup_operation fails: it cannot say whether a key has a job\n" +
			"  lookup_delay=DURATION           lookup_operation does not see jobs younger than DURATION (e.g. 2s)\n" +
			"  overcharge=AMOUNT               a job's final charge is AMOUNT USD (e.g. 23.10)\n" +
			"  no_invoice                      jobs complete without any charge record\n" +
			"  slow[=FACTOR|DURATION]          jobs take FACTOR times as long (e.g. 4x, default 10x) or DURATION longer (e.g. 2s)\n" +
			"  fail_jobs                       jobs end failed and their pending charge is refunded\n" +
			"  crash_after_accept              the process exits (status 3) right after recording a new job",
		Example: "  taskgate provider-sim\n  taskgate provider-sim --fault drop_response_after_accept --fault overcharge=23.10",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := noLedger(cmd, "keeps its own record (see --state)"); err != nil {
				return err
			}
			fs, err := providersim.ParseFaults(faults...)
			if err != nil {
				return &usageError{msg: err.Error(), hint: "taskgate provider-sim --help"}
			}
			e.verbose()
			sim, err := providersim.Open(&providersim.Options{Logger: e.logger(), Faults: fs, StatePath: state, JobDuration: duration})
			if err != nil {
				return err
			}
			defer sim.Close()
			ctx := cmd.Context()
			if stdio {
				return sim.ServeStdio(ctx, e.stdin, e.stdout)
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("provider-sim: listen on %s: %w", listen, err)
			}
			srv := &http.Server{Handler: sim.HTTPHandler(), ReadHeaderTimeout: 10 * time.Second}
			go func() {
				<-ctx.Done()
				sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = srv.Shutdown(sctx)
			}()
			fmt.Fprintf(e.stderr, "provider-sim serving MCP at http://%s/mcp (record at /sim/record; faults: %s)\n", ln.Addr(), fs)
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8940", "address to serve on")
	cmd.Flags().StringArrayVar(&faults, "fault", nil, "inject a fault, NAME or NAME=VALUE (repeatable; the faults are listed above)")
	cmd.Flags().BoolVar(&stdio, "stdio", false, "serve MCP on stdin/stdout instead of HTTP")
	cmd.Flags().StringVar(&state, "state", "", "keep the job and invoice record in this JSON file (survives restarts)")
	cmd.Flags().DurationVar(&duration, "job-duration", providersim.DefaultJobDuration, "how long a job runs")
	return cmd
}

func (e *env) reconcileCmd() *cobra.Command {
	var (
		cfgPath string
		tenant  string
	)
	cmd := &cobra.Command{
		Use:   "reconcile [OPERATION_ID|TASK_ID] --config taskgate.yaml",
		Short: "Reconcile an operation, or every open one, with its provider now",
		Long: "reconcile asks the provider about an operation's remote jobs and charges now, records what it finds\n" +
			"in the ledger, as the gateway's own reconciler does, and prints the receipt's figures.\n\n" +
			"Without an ID it reconciles every open operation, newest first: each one that has not ended\n" +
			"(accepted, sending, running or review) and each ended one whose receipt's reconciliation_status\n" +
			"is not complete. It reads the whole ledger (or the tenant's part) to find them.\n\n" +
			"It needs the gateway's own configuration, for the upstreams and provider contracts the operations\n" +
			"ran under, and opens that configuration's database unless --db or TASKGATE_DB names another.",
		Example: "  taskgate reconcile settlement-regression-842 --config taskgate.yaml\n  taskgate reconcile --config taskgate.yaml --tenant acme",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := e.loadConfig(cmd, cfgPath)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			store, err := e.openLedger(ctx, cfg.Database)
			if err != nil {
				return err
			}
			defer store.Close()
			var ops []*ledger.Operation
			if len(args) == 1 {
				op, err := findOperation(ctx, store, tenant, args[0])
				if err != nil {
					return err
				}
				ops = []*ledger.Operation{op}
			} else if ops, err = openOperations(ctx, store, tenant); err != nil {
				return err
			}
			catalog := provider.NewCatalog(cfg)
			if err := configured(cfg, catalog, ops); err != nil {
				return err
			}
			if len(ops) == 0 {
				fmt.Fprintf(e.stderr, "no open operations in ledger %s\n", dburl.Describe(cfg.Database))
				return nil
			}
			log := e.logger()
			pool := upstream.NewPool(cfg.Upstreams, &upstream.Options{Logger: log})
			pool.Start(ctx)
			defer pool.Close()
			w, err := worker.New(&worker.Options{Store: store, Upstreams: worker.FromPool(pool), Catalog: catalog, Config: cfg, Logger: log})
			if err != nil {
				return err
			}
			for _, op := range ops {
				if _, err := w.Reconcile(ctx, op.ID); err != nil {
					return fmt.Errorf("reconcile %s: %w", op.OperationID, err)
				}
				op, err = store.OperationGet(ctx, &ledger.OperationGetParams{ID: op.ID})
				if err != nil {
					return err
				}
				in, err := receipt.Load(ctx, store, op, nil)
				if err != nil {
					return err
				}
				r := receipt.Build(in)
				fmt.Fprintf(e.stdout, "%s\t%s\tjobs %d\tduplicates %d\tfinal %s\treconciliation %s\treview %s\n",
					op.OperationID, op.Tenant, r.ObservedRemoteJobs, r.DuplicateJobs, r.FinalCostUSD.String(), r.ReconciliationStatus, r.ReviewStatus)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "the gateway's configuration file (YAML), naming the upstreams and provider contracts")
	cmd.Flags().StringVar(&tenant, "tenant", "", "only this tenant's operations; with an ID, the tenant it belongs to (needed when several tenants use the same operation ID)")
	return cmd
}

// openOperations lists the operations reconcile looks at without an ID:
// those that have not ended, and ended ones whose receipt is not yet
// reconciled, newest first.
func openOperations(ctx context.Context, s ledger.Store, tenant string) ([]*ledger.Operation, error) {
	var out []*ledger.Operation
	p := &ledger.OperationListParams{Tenant: tenant, Limit: 200}
	for {
		page, err := s.OperationList(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("list operations: %w", err)
		}
		for _, op := range page {
			open := !op.State.Terminal()
			if !open {
				in, err := receipt.Load(ctx, s, op, nil)
				if err != nil {
					return nil, err
				}
				open = receipt.Build(in).ReconciliationStatus != receipt.ReconciliationComplete
			}
			if open {
				out = append(out, op)
			}
		}
		if len(page) < p.Limit {
			return out, nil
		}
		p.BeforeID = page[len(page)-1].ID
	}
}

// configured refuses to reconcile operations whose tool the configuration
// does not hold as consequential: without its provider contract the
// reconciler could only record that it could not ask.
func configured(cfg *config.Config, catalog *provider.Catalog, ops []*ledger.Operation) error {
	var missing []string
	for _, op := range ops {
		if name := op.Upstream + "." + op.Tool; catalog.Contract(op.Upstream, op.Tool) == nil && !slices.Contains(missing, name) {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return &usageError{
		msg: fmt.Sprintf("%s has no consequential tool %s, which the operations to reconcile ran; pass the gateway's own configuration",
			cfg.File, strings.Join(missing, ", ")),
		hint: "taskgate reconcile --config FILE, where FILE is the configuration taskgate serve runs with",
	}
}
