package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
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

// loadConfig reads the configuration and lets --db / TASKGATE_DB override
// its database.
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
func (e *env) verbose(cmd *cobra.Command) {
	if !cmd.Flags().Changed("log-level") {
		e.logLevel = "info"
	}
}

func (e *env) serveCmd() *cobra.Command {
	var (
		cfgPath string
		listen  string
		stdio   bool
	)
	cmd := &cobra.Command{
		Use:   "serve --config taskgate.yaml",
		Short: "Run the gateway: MCP over Streamable HTTP at /mcp, or over stdio with --stdio",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e.verbose(cmd)
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
			d, err := daemon.Start(ctx, &daemon.Options{Config: cfg, Logger: log, NoHTTP: stdio})
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
		Use:   "provider-sim --listen 127.0.0.1:8940 [--fault NAME...]",
		Short: "Run the simulated paid provider (hosted_test) on its own",
		Long: "Runs providersim, a simulated hosted test-suite provider, as an MCP server (Streamable HTTP at /mcp,\n" +
			"its record at /sim/record, or stdio). Faults: " + strings.Join(providersim.FaultNames(), ", ") + ".",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fs, err := providersim.ParseFaults(faults...)
			if err != nil {
				return &usageError{msg: err.Error(), hint: "taskgate provider-sim --help"}
			}
			e.verbose(cmd)
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
	cmd.Flags().StringArrayVar(&faults, "fault", nil, "inject a fault (repeatable), e.g. drop_response_after_accept or overcharge=23.10")
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
		Short: "Reconcile an operation (or every unfinished one) with its provider now",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := e.loadConfig(cmd, cfgPath)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			store, err := e.openStore(ctx)
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
			} else if ops, err = store.OperationList(ctx, &ledger.OperationListParams{Tenant: tenant, Limit: 1000}); err != nil {
				return err
			}
			log := e.logger()
			pool := upstream.NewPool(cfg.Upstreams, &upstream.Options{Logger: log})
			pool.Start(ctx)
			defer pool.Close()
			w, err := worker.New(&worker.Options{Store: store, Upstreams: worker.FromPool(pool), Catalog: provider.NewCatalog(cfg), Config: cfg, Logger: log})
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
	cmd.Flags().StringVar(&cfgPath, "config", "", "the configuration file naming the upstreams (YAML)")
	cmd.Flags().StringVar(&tenant, "tenant", "", "only this tenant's operations")
	return cmd
}
