// Package sqlitestore is the providerkit job store in an embedded SQLite
// database (pure Go): one file, written by one server process at a time,
// every commit durable before a call is answered.
package sqlitestore

import (
	"context"
	"database/sql"
	"embed"
	"fmt"

	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

	"github.com/taskgate/taskgate/providerkit/internal/jobsql"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store is a job store in one SQLite file.
type Store struct {
	*jobsql.Store
	db *sql.DB
}

// Open opens (creating it if need be) the job store in the file path and
// brings its schema up to date.
func Open(ctx context.Context, path string) (*Store, error) {
	// WAL with synchronous FULL: a job recorded is on disk before its call
	// goes on, so a crash right after cannot forget a key a lookup saw.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(1)")
	if err != nil {
		return nil, fmt.Errorf("open job store %s: %w", path, err)
	}
	// One connection: SQLite has one writer, and the kit's load is small.
	db.SetMaxOpenConns(1)
	if err := jobsql.Migrate(ctx, db, goose.DialectSQLite3, migrations); err != nil {
		db.Close()
		return nil, fmt.Errorf("job store %s: %w", path, err)
	}
	return &Store{Store: jobsql.New(db, false), db: db}, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }
