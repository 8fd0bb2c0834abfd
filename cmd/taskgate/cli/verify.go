package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/dburl"
)

// verifyPage is how many operations verify reads at a time.
const verifyPage = 200

// chainTally counts what verify found.
type chainTally struct {
	chains, events, fromMigration, unchained int
	broken                                   []*ledger.Chain
	// first is the break of broken[0].
	first *ledger.ChainBreak
}

func (e *env) verifyCmd() *cobra.Command {
	var tenant, archiveDir, jwks string
	cmd := &cobra.Command{
		Use:   "verify [OPERATION_ID...] | --archive DIR [--jwks FILE]",
		Short: "Check the ledger's hash chains: no event edited, deleted or reordered",
		Long: "Each operation's events form a hash chain: every event stores the SHA-256 of its canonical\n" +
			"content, which names the event before it, and the operation keeps the latest as its head.\n" +
			"verify reads every chain (or only those of the operation IDs given, and of --tenant's\n" +
			"operations) and checks each link. It exits 0 with a summary when every chain holds.\n" +
			"Otherwise it names, for each operation whose chain does not hold, the first event that does\n" +
			"not match and how (edited; missing: a row deleted; reordered; added), and exits 1. The chain\n" +
			"of an operation accepted before the ledger kept chains starts at migration 00010; its\n" +
			"earlier events are counted, not verified.\n" +
			"With --archive it reads no ledger's operations: it checks an archive that taskgate archive wrote,\n" +
			"each run's checkpoint signature (against --jwks, or the ledger's signing keys), its manifest, every\n" +
			"line's digest, every operation's hash chain and every file's digest, and names the first thing that\n" +
			"does not hold: the file, and the line and operation when one is to blame.",
		Example: "  taskgate verify\n  taskgate verify settlement-regression-842 --tenant acme",
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, ids []string) error {
			if archiveDir != "" {
				if len(ids) > 0 || tenant != "" {
					return &usageError{msg: "--archive verifies a whole archive; it takes no operation IDs or --tenant", hint: "taskgate verify --archive " + archiveDir}
				}
				return e.verifyArchive(cmd, archiveDir, jwks)
			}
			if jwks != "" {
				return &usageError{msg: "--jwks names the keys an archive's checkpoint is checked with; give --archive too", hint: "taskgate verify --archive DIR --jwks " + jwks}
			}
			ctx := cmd.Context()
			s, err := e.openStore(ctx)
			if err != nil {
				return err
			}
			defer s.Close()
			var (
				tally chainTally
				seen  = map[string]bool{}
			)
			p := ledger.ChainListParams{Tenant: tenant, OperationIDs: ids, Limit: verifyPage}
			for {
				page, err := s.ChainList(ctx, &p)
				if err != nil {
					return fmt.Errorf("read the hash chains of ledger %s: %w", dburl.Describe(e.db), err)
				}
				for _, c := range page {
					seen[c.OperationID] = true
					check := c.Check()
					tally.add(c, check)
					if check.Break != nil {
						fmt.Fprintf(e.stdout, "%s: %s\n", chainName(c), describeBreak(check.Break))
					} else if len(ids) > 0 {
						fmt.Fprintf(e.stdout, "%s: holds, %s\n", chainName(c), describeHeld(check))
					}
				}
				if len(page) < p.Limit {
					break
				}
				p.AfterRef = page[len(page)-1].OperationRef
			}
			if missing := unseen(ids, seen); len(missing) > 0 {
				where := "the ledger"
				if tenant != "" {
					where = fmt.Sprintf("the ledger for tenant %q", tenant)
				}
				return &usageError{msg: fmt.Sprintf("no operation %s in %s", strings.Join(missing, ", "), where),
					hint: "taskgate ops list" + tenantFlag(tenant)}
			}
			if len(tally.broken) > 0 {
				first := tally.broken[0]
				return fmt.Errorf("the hash chains of %d of %s in ledger %s do not hold, the first that of %s (at %s); "+
					"the ledger was changed outside taskgate: keep a copy of it as evidence, and restore it from a backup",
					len(tally.broken), plural(tally.chains, "operation"), dburl.Describe(e.db), chainName(first), breakAt(tally.first))
			}
			fmt.Fprintln(e.stdout, tally.summary(dburl.Describe(e.db)))
			return nil
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "verify only this tenant's operations")
	cmd.Flags().StringVar(&archiveDir, "archive", "", "verify the archive in this directory instead of the ledger")
	cmd.Flags().StringVar(&jwks, "jwks", "", "with --archive: the JWK Set (file or URL) of the keys to trust; default the ledger's signing keys")
	return cmd
}

func (t *chainTally) add(c *ledger.Chain, check ledger.ChainCheck) {
	t.chains++
	t.events += check.Chained
	t.unchained += check.Unchained
	if check.FromMigration {
		t.fromMigration++
	}
	if check.Break != nil {
		if len(t.broken) == 0 {
			t.first = check.Break
		}
		t.broken = append(t.broken, c)
	}
}

// summary is the one line verify prints when every chain holds.
func (t *chainTally) summary(ledgerName string) string {
	line := fmt.Sprintf("every hash chain in ledger %s holds: %s, %s", ledgerName, plural(t.chains, "operation"), plural(t.events, "chained event"))
	if t.fromMigration > 0 {
		line += fmt.Sprintf("; the chains of %s start at migration 00010, after %s recorded before it", plural(t.fromMigration, "operation"), plural(t.unchained, "event"))
	}
	return line
}

// chainName names an operation as verify prints it.
func chainName(c *ledger.Chain) string {
	return fmt.Sprintf("operation %q of tenant %q", c.OperationID, c.Tenant)
}

// breakAt names the event at which a chain breaks.
func breakAt(b *ledger.ChainBreak) string {
	if b.Event == nil {
		return "its head, " + string(b.Problem)
	}
	return fmt.Sprintf("event %d (%s), %s", b.Event.ID, b.Event.Kind, b.Problem)
}

func describeBreak(b *ledger.ChainBreak) string {
	return breakAt(b) + ": " + b.Detail
}

func describeHeld(check ledger.ChainCheck) string {
	s := plural(check.Chained, "chained event")
	if check.FromMigration {
		s += fmt.Sprintf("; the chain starts at migration 00010, after %s recorded before it", plural(check.Unchained, "event"))
	}
	return s
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// unseen lists, quoted, the IDs no chain was read for.
func unseen(ids []string, seen map[string]bool) []string {
	var out []string
	for _, id := range ids {
		if !seen[id] && !slices.Contains(out, fmt.Sprintf("%q", id)) {
			out = append(out, fmt.Sprintf("%q", id))
		}
	}
	return out
}

func tenantFlag(tenant string) string {
	if tenant == "" {
		return ""
	}
	return " --tenant " + tenant
}
