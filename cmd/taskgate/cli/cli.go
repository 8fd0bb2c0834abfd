// Package cli builds the taskgate command line (cobra). Each command parses
// its flags, opens what it needs and delegates to the packages that hold the
// work; errors surface once on stderr with a non-zero exit: one line,
// followed by a "Try:" hint for a usage error or by one line per invalid
// field for a bad configuration. It must never hold decisions of its own
// about operations or money.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/internal/buildinfo"
	"github.com/taskgate/taskgate/internal/inert"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/dburl"
)

// env is what every command shares.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	db             string
	logLevel       string
	getenv         func(string) string
}

// usageError is a mistake in how a command was called; hint says what to try.
type usageError struct {
	msg, hint string
}

func (e *usageError) Error() string { return e.msg }

// Main runs the command line and returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	e := &env{stdin: os.Stdin, stdout: stdout, stderr: stderr, getenv: getenv}
	root := e.root()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var exit *exitError
	if errors.As(err, &exit) {
		return exit.code
	}
	if errors.Is(err, config.ErrInvalid) {
		// Every invalid field on its own line: file, line, field, reason.
		fmt.Fprintln(stderr, "Error: invalid configuration:")
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(stderr, "  %s\n", line)
		}
		return 1
	}
	fmt.Fprintf(stderr, "Error: %s\n", inert.Terminal(oneLine(err.Error())))
	var ue *usageError
	if errors.As(err, &ue) && ue.hint != "" {
		fmt.Fprintf(stderr, "Try: %s\n", inert.Terminal(ue.hint))
	}
	return 1
}

// exitError ends the process with code after the command printed its own
// account of what went wrong.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// positional is s as the last word of a command a person pastes: a shell
// word, after "--" when it begins with "-" so that it is not read as a flag.
func positional(s string) string {
	if strings.HasPrefix(s, "-") {
		return "-- " + inert.Shell(s)
	}
	return inert.Shell(s)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func (e *env) root() *cobra.Command {
	root := &cobra.Command{
		Use:   "taskgate",
		Short: "A durable MCP gateway for paid and consequential tool calls",
		Long: "taskgate accepts each logical operation once per tenant, passes the operation ID to the provider,\n" +
			"looks up before it ever re-sends, enforces approvals and spend ceilings, and reconciles every\n" +
			"remote job and charge into a receipt.\n\n" +
			"To see it work, run taskgate demo. To run it: copy config/taskgate.example.yaml to taskgate.yaml,\n" +
			"create a key with taskgate keys create --tenant NAME, and start taskgate serve --config taskgate.yaml.",
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			if e.logLevel != "" && !slices.Contains(logLevels(), strings.ToLower(e.logLevel)) {
				return &usageError{
					msg:  fmt.Sprintf("--log-level %q is not a log level; use %s", e.logLevel, strings.Join(logLevels(), ", ")),
					hint: "taskgate --log-level debug COMMAND",
				}
			}
			return nil
		},
	}
	def := e.getenv("TASKGATE_DB")
	if def == "" {
		def = dburl.Default
	}
	root.PersistentFlags().StringVar(&e.db, "db", def,
		"the ledger: sqlite:PATH or postgres://URL (env TASKGATE_DB);\n"+
			"given, it replaces the configuration's database for serve and reconcile;\n"+
			"fixtures use only its kind; demo and provider-sim use none")
	root.PersistentFlags().StringVar(&e.logLevel, "log-level", "",
		"debug, info, warn or error; unset: info for serve and provider-sim,\n"+
			"warn for the other commands, nothing for demo and fixtures")
	root.AddCommand(e.migrateCmd(), e.opsCmd(), e.approveCmd(), e.approvalsCmd(), e.approvalRequestsCmd(), e.budgetsCmd(), e.keysCmd(), e.receiptCmd(), e.packetCmd(),
		e.serveCmd(), e.reloadCmd(), e.providerSimCmd(), e.reconcileCmd(), e.demoCmd(), e.fixturesCmd(), e.secretsKeyCmd(), e.verifyCmd(), e.archiveCmd())
	root.AddCommand(e.signingKeysCmd(), e.versionCmd(), e.backupCmd(), e.contractCmd())
	root.Version = buildinfo.Read().Version
	root.SetVersionTemplate(versionTemplate())
	group(root)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		hint := c.CommandPath() + " --help"
		if c.Args != nil && c.Args(c, nil) != nil && c.Args(c, []string{"ID"}) == nil {
			// The command takes one argument, an ID, which may begin with
			// "-" (a kid is base64url, an operation ID the model's
			// choice); after "--" it is no flag.
			hint = c.CommandPath() + " [flags] -- ID, when the ID begins with -; else " + hint
		}
		return &usageError{msg: err.Error(), hint: hint}
	})
	return root
}

// logLevels are the values --log-level takes.
func logLevels() []string { return []string{"debug", "info", "warn", "error"} }

// group makes cmd a command that only holds subcommands: alone it prints its
// help; followed by anything else it is a usage error naming the unknown
// command, where cobra would print the help and succeed.
func group(cmd *cobra.Command) {
	cmd.Args = cobra.ArbitraryArgs
	cmd.SuggestionsMinimumDistance = 2
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return c.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			msg += fmt.Sprintf("; did you mean %q?", s[0])
		}
		return &usageError{msg: msg, hint: c.CommandPath() + " --help"}
	}
}

// noLedger refuses --db on a command that uses no ledger of the user's, so
// that the flag is never silently ignored.
func noLedger(cmd *cobra.Command, why string) error {
	if cmd.Flags().Changed("db") {
		return &usageError{msg: fmt.Sprintf("--db does not apply: %s %s", cmd.Name(), why), hint: cmd.CommandPath() + " --help"}
	}
	return nil
}

// logger logs at --log-level, warn when it was not given.
func (e *env) logger() *slog.Logger {
	lvl := slog.LevelWarn
	if e.logLevel != "" {
		// PersistentPreRunE has checked the name.
		_ = lvl.UnmarshalText([]byte(e.logLevel))
	}
	return slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: lvl}))
}

// openStore opens the ledger named by --db and applies pending migrations,
// as every command that touches the ledger does at start.
func (e *env) openStore(ctx context.Context) (ledger.Store, error) {
	return e.openLedger(ctx, e.db)
}

// openLedger opens the ledger at url and applies pending migrations.
func (e *env) openLedger(ctx context.Context, url string) (ledger.Store, error) {
	return e.openLedgerWith(ctx, url, nil)
}

func (e *env) migrateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Apply pending ledger and job-queue migrations",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := e.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			fmt.Fprintf(e.stdout, "ledger %s is up to date (%s)\n", dburl.Describe(e.db), s.Dialect())
			return nil
		},
	}
}
