package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskgate/taskgate/ledger/dburl"
	"github.com/taskgate/taskgate/sim/fixtures"
)

func (e *env) fixturesCmd() *cobra.Command {
	var (
		only     []string
		format   string
		parallel int
	)
	cmd := &cobra.Command{
		Use:   "fixtures [--only NAME]... [--format table|json] [--parallel N]",
		Short: "Run the named failure scenarios against a real gateway and a simulated paid provider",
		Long: "fixtures stages each named failure (a lost response, a broken provider index, a killed gateway, …)\n" +
			"on a fresh ledger of the kind --db names — a new SQLite file per scenario in a temporary directory\n" +
			"for sqlite: (any path after it is not used), a new schema per scenario in the named database for\n" +
			"postgres:// — and compares the expected outcome with what the provider's own record, the ledger\n" +
			"and the receipt show. It exits non-zero if any scenario fails.\n\n" +
			"Scenarios: " + strings.Join(fixtures.Names(), ", ") + ".",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			hint := "taskgate fixtures --only fresh_keys_control --format json"
			if format != "table" && format != "json" {
				return &usageError{msg: fmt.Sprintf("--format %q is not a fixtures format; use table or json", format), hint: hint}
			}
			if parallel < 1 {
				return &usageError{msg: fmt.Sprintf("--parallel %d: run at least one scenario at a time", parallel), hint: hint}
			}
			if _, err := fixtures.Select(only); err != nil {
				var unknown *fixtures.UnknownScenarioError
				if errors.As(err, &unknown) {
					return &usageError{msg: err.Error(), hint: "taskgate fixtures --only " + fixtures.Names()[0]}
				}
				return err
			}
			env, kind, err := e.fixturesEnv()
			if err != nil {
				return err
			}
			env.Parallel = parallel
			log := slog.New(slog.DiscardHandler)
			if e.logLevel != "" {
				log = e.logger()
			}
			env.Logger = log
			env.Progress = func(r fixtures.Result) {
				verdict := "ok  "
				if !r.Pass {
					verdict = "FAIL"
				}
				fmt.Fprintf(e.stderr, "%s %s (%s)", verdict, r.Name, r.Duration.Round(100*time.Millisecond))
				if !r.Pass {
					fmt.Fprintf(e.stderr, ": %s", r.Detail)
				}
				fmt.Fprintln(e.stderr)
			}
			n := len(fixtures.Names())
			if len(only) > 0 {
				n = len(only)
			}
			fmt.Fprintf(e.stderr, "running %d fixture scenarios, each on a fresh %s ledger\n", n, kind)
			results, err := fixtures.Run(cmd.Context(), env, only)
			if err != nil {
				return err
			}
			if format == "json" {
				err = fixtures.WriteJSON(e.stdout, results)
			} else {
				err = fixtures.WriteTable(e.stdout, results)
			}
			if err != nil {
				return err
			}
			passed := 0
			for _, r := range results {
				if r.Pass {
					passed++
				}
			}
			fmt.Fprintf(e.stderr, "%d of %d scenarios passed\n", passed, len(results))
			if passed < len(results) {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&only, "only", nil, "run only this scenario (repeatable)")
	cmd.Flags().StringVar(&format, "format", "table", "table or json")
	cmd.Flags().IntVar(&parallel, "parallel", 4, "how many scenarios run at once")
	return cmd
}

// fixturesEnv makes the scenarios' environment for the ledger kind --db
// names. The child-process gateway is this very program.
func (e *env) fixturesEnv() (*fixtures.Env, string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", fmt.Errorf("find this program to run it as a gateway process: %w", err)
	}
	env := &fixtures.Env{Gateway: []string{self}}
	switch {
	case strings.HasPrefix(e.db, "sqlite:"):
		env.DB = fixtures.SQLiteLedgers
		return env, "SQLite", nil
	case strings.HasPrefix(e.db, "postgres://"), strings.HasPrefix(e.db, "postgresql://"):
		env.DB = fixtures.PostgresLedgers(e.db)
		return env, "PostgreSQL", nil
	}
	return nil, "", &usageError{
		msg:  fmt.Sprintf("--db %s names no ledger kind fixtures can use", dburl.Describe(e.db)),
		hint: "taskgate fixtures --db sqlite:, or --db postgres://user@host:5432/dbname",
	}
}
