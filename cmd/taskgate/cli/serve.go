package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/daemon"
	"github.com/taskgate/taskgate/ledger/dburl"
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
	for _, w := range cfg.Warnings {
		e.logger().Warn("configuration: "+w.Error(), "field", w.Field)
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

// sdkPathEnv turns on serve's SDK-path test switch
// (daemon.Options.SDKPathOnly). Only the environment sets it, never the
// configuration, so that no shipped configuration can.
const sdkPathEnv = "TASKGATE_TEST_SDK_PATH"

// sdkPathOnly reads sdkPathEnv strictly: 1 or true turn the switch on,
// unset or empty leaves it off, and anything else is refused rather than
// guessed at.
func sdkPathOnly(getenv func(string) string) (bool, error) {
	switch v := getenv(sdkPathEnv); v {
	case "":
		return false, nil
	case "1", "true":
		return true, nil
	default:
		return false, fmt.Errorf("%s=%q is neither 1 nor true: set it to 1 to send every pass-through call down the SDK path (a test switch), or unset it", sdkPathEnv, v)
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
		Long: "serve applies pending ledger migrations, starts the background worker (unless --no-worker), connects\n" +
			"every upstream in the background (starting and supervising stdio upstreams) and serves MCP over\n" +
			"Streamable HTTP at /mcp, with /healthz, /readyz, /metrics, the approvals API at /v1/approvals and\n" +
			"receipts at /v1/operations/{id}/receipt on the same listener. With --stdio it serves one local\n" +
			"client on stdin/stdout instead, as the configuration's auth.stdio_tenant.\n\n" +
			"The ledger is the configuration's database unless --db or TASKGATE_DB names another. The first\n" +
			"SIGINT or SIGTERM stops taking requests and lets in-flight ones finish. SIGHUP, or taskgate reload\n" +
			"over the control socket (control_socket), applies a changed configuration without a restart.\n" +
			"serve sets GOGC=400 unless GOGC is set. See config/taskgate.example.yaml for every configuration field.\n\n" +
			"TASKGATE_TEST_SDK_PATH=1 is a test switch: every pass-through call takes the SDK path instead of\n" +
			"being relayed as bytes, to compare the two (make conformance does). Slower; not for production.",
		Example: "  taskgate serve --config taskgate.yaml\n  taskgate serve --config taskgate.yaml --listen 127.0.0.1:9000\n  taskgate serve --config taskgate.yaml --stdio",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e.verbose()
			sdkPath, err := sdkPathOnly(e.getenv)
			if err != nil {
				return err
			}
			// A reload reads its file as the configuration was read here,
			// overrides included.
			load := func(path string) (*config.Config, error) {
				cfg, err := e.loadConfig(cmd, path)
				if err != nil {
					return nil, err
				}
				if listen != "" {
					if !strings.Contains(cfg.PublicURL, listen) && cfg.PublicURL == "http://"+cfg.Listen {
						cfg.PublicURL = "http://" + listen
					}
					cfg.Listen = listen
				}
				return cfg, nil
			}
			cfg, err := load(cfgPath)
			if err != nil {
				return err
			}
			// SIGHUP reloads; caught from the start, so that one sent while
			// starting does not end the process.
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			ring, err := e.secretsRing(cfg)
			if err != nil {
				return err
			}
			if err := cfg.CheckSecretsKey(ring != nil); err != nil {
				return err
			}
			log := e.logger()
			gc := daemon.TuneGC(e.getenv)
			ctx := cmd.Context()
			log.Info("starting", "gogc", gc, "secrets", ring)
			control := cfg.ControlSocketPath(os.TempDir())
			if stdio && cfg.ControlSocket == "" {
				// One stdio gateway runs per client: none owns the default.
				control = ""
			}
			d, err := daemon.Start(ctx, &daemon.Options{Config: cfg, Logger: log, NoHTTP: stdio, NoWorker: noWorker, Secrets: ring, ServeAtOnce: !stdio,
				ControlSocket: control, LoadConfig: load, SDKPathOnly: sdkPath, Getenv: e.getenv})
			if err != nil {
				return err
			}
			go func() {
				for range hup {
					log.Info("SIGHUP: reloading the configuration", "file", cfgPath)
					next, err := load(cfgPath)
					if err != nil {
						log.Error("configuration reload refused; the running configuration stays", "file", cfgPath, "err", err)
						d.ReloadRefused()
						continue
					}
					_, _ = d.Reload(ctx, next)
				}
			}()
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
