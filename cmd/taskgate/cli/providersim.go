package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskgate/taskgate/sim/providersim"
)

// providerSimCmd runs the simulated provider of sim: the binary
// offers it for trying taskgate out, and nothing that serves depends on it.
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
			"(billed per job, honouring an idempotency key), run_matrix (1 to 64 runners at once, each billed as\n" +
			"its own job), lookup_operation, get_job, list_charges, cancel_job, estimate_suite and estimate_matrix.\n" +
			"config/taskgate.example.yaml points at it.\n\n" +
			"Faults (--fault, repeatable):\n" +
			"  drop_response_after_accept[=N]  accept the next N (default 1) calls that start jobs, then never answer\n" +
			"  ignore_idempotency_key          every run_suite or run_matrix starts new jobs, whatever its key\n" +
			"  lookup_indeterminate            lookup_operation fails: it cannot say whether a key has a job\n" +
			"  lookup_delay=DURATION           lookup_operation does not see jobs younger than DURATION (e.g. 2s)\n" +
			"  overcharge=AMOUNT               a job's final charge is AMOUNT USD (e.g. 23.10)\n" +
			"  no_invoice                      jobs complete without any charge record\n" +
			"  slow[=FACTOR|DURATION]          jobs take FACTOR times as long (e.g. 4x, default 10x) or DURATION longer (e.g. 2s)\n" +
			"  fail_jobs                       jobs end failed and their pending charge is refunded\n" +
			"  crash_after_accept              the process exits (status 3) right after recording a new job or matrix\n" +
			"  extra_runner                    each new matrix starts one runner more than run_matrix asked for\n" +
			"  missing_runner                  each new matrix starts one runner fewer than run_matrix asked for",
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
