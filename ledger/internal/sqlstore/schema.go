package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"

	"github.com/taskgate/taskgate/ledger"
)

// SchemaVersionTable is the table in which goose records the ledger's
// schema version.
const SchemaVersionTable = "taskgate_schema_version"

// NewMigrations returns the goose provider that applies the ledger
// migrations in fsys to db, recording them in [SchemaVersionTable].
func NewMigrations(dialect goose.Dialect, db *sql.DB, fsys fs.FS) (*goose.Provider, error) {
	return goose.NewProvider(dialect, db, fsys, goose.WithTableName(SchemaVersionTable))
}

// LatestVersion returns the highest migration number in fsys: the schema
// version of a binary that embeds fsys, which it writes on every
// operation it accepts.
func LatestVersion(fsys fs.FS) (int64, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return 0, fmt.Errorf("list ledger migrations: %w", err)
	}
	var latest int64
	for _, name := range names {
		v, err := goose.NumericComponent(name)
		if err != nil {
			return 0, fmt.Errorf("ledger migration %s: %w", name, err)
		}
		latest = max(latest, v)
	}
	if latest == 0 {
		return 0, fmt.Errorf("no ledger migrations are embedded")
	}
	return latest, nil
}

// MigrateLedger applies p's pending migrations to the ledger named where,
// unless a newer binary has already taken the ledger past latest: then it
// changes nothing and says which versions to run.
func MigrateLedger(ctx context.Context, p *goose.Provider, latest int64, where string) error {
	current, err := p.GetDBVersion(ctx)
	if err != nil {
		return fmt.Errorf("read the schema version of the ledger %s: %w", where, err)
	}
	if current > latest {
		return fmt.Errorf("%w: the ledger %s is at schema version %d and this taskgate knows versions up to %d; "+
			"a newer taskgate has migrated it, so run that version or a later one on every replica", ledger.ErrSchemaNewer, where, current, latest)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate the ledger %s: %w", where, err)
	}
	return nil
}
