package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/taskgate/taskgate/internal/inert"
	"github.com/taskgate/taskgate/ledger/dburl"
)

func (e *env) backupCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "backup --out FILE",
		Short: "Copy a SQLite ledger, consistently, while gateways serve it",
		Long: "backup writes a consistent copy of the SQLite ledger named by --db to a new file while gateways\n" +
			"keep serving it, syncs it to disk, then opens the copy and checks it (SQLite's integrity check\n" +
			"and the schema version) before it reports success. It never overwrites a file. To restore, stop\n" +
			"the gateways and copy the file into place as the ledger; operations that were open resume and\n" +
			"look up at the provider before anything is sent again.\n\n" +
			"A PostgreSQL ledger is backed up with pg_dump and restored with pg_restore; see\n" +
			"docs/operations.md, \"Back up and restore\".",
		Example: "  taskgate backup --db sqlite:/var/lib/taskgate/taskgate.db --out /backups/taskgate-2026-12-02.db",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return &usageError{msg: "backup needs --out FILE: the new file to write the copy to", hint: "taskgate backup --out taskgate-backup.db"}
			}
			ctx := cmd.Context()
			s, err := e.openStore(ctx)
			if err != nil {
				return err
			}
			defer s.Close()
			b, err := s.Backup(ctx, out)
			if err != nil {
				return fmt.Errorf("back up ledger %s: %w", dburl.Describe(e.db), err)
			}
			fmt.Fprintf(e.stdout, "backed up ledger %s to %s: %d bytes, schema version %d, integrity ok\n",
				inert.Terminal(dburl.Describe(e.db)), inert.Terminal(b.Path), b.Bytes, b.SchemaVersion)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "the new file to write the copy to (required; never overwritten)")
	return cmd
}
