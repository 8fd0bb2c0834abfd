// Package postgresstore is the providerkit job store in PostgreSQL, which
// several replicas of a server can share: the database's unique key makes
// one job per idempotency key whichever replica a call reaches.
package postgresstore

import (
	"context"
	"database/sql"
	"embed"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/taskgate/taskgate/providerkit/internal/jobsql"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store is a job store in a PostgreSQL database.
type Store struct {
	*jobsql.Store
	db *sql.DB
}

// Open connects to the database at url (postgres://…; its search_path
// picks the schema) and brings the job store's tables up to date.
func Open(ctx context.Context, url string) (*Store, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("job store: the PostgreSQL URL does not parse: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("job store: connect to PostgreSQL at %s: %w", cfg.Host, err)
	}
	// Replicas that start together take turns at the schema.
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		db.Close()
		return nil, err
	}
	if err := jobsql.Migrate(ctx, db, goose.DialectPostgres, migrations, goose.WithSessionLocker(locker)); err != nil {
		db.Close()
		return nil, fmt.Errorf("job store: %w", err)
	}
	return &Store{Store: jobsql.New(db, true), db: db}, nil
}

// Close closes the connections.
func (s *Store) Close() error { return s.db.Close() }
