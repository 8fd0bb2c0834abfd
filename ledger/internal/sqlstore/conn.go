// Package sqlstore implements ledger.Store once, over SQL that both SQLite
// and PostgreSQL accept ($N placeholders, RETURNING, ON CONFLICT).
// The two database packages supply a Driver: connections, migrations, the
// transaction type River enqueues into, and error classification. Nothing
// dialect-specific belongs here beyond the Driver's capability methods.
package sqlstore

import (
	"context"

	"github.com/riverqueue/river"
)

// Querier runs SQL with $N placeholders. Arguments of type time.Time are
// encoded by the driver (timestamptz on PostgreSQL, Unix microseconds on
// SQLite); a zero time.Time is stored as NULL.
type Querier interface {
	Exec(ctx context.Context, query string, args ...any) (rowsAffected int64, err error)
	Query(ctx context.Context, query string, args ...any) (Rows, error)
	QueryRow(ctx context.Context, query string, args ...any) Row
}

// Rows iterates query results.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Row is one query result.
type Row interface {
	Scan(dest ...any) error
}

// Tx is an open transaction that can also enqueue River jobs, so that work
// and the records that justify it commit together.
type Tx interface {
	Querier
	// InsertID runs query, an INSERT of one row into a table keyed by an
	// integer id, and returns the new row's id; a row that ON CONFLICT
	// DO NOTHING skipped is an error the Driver interprets as
	// ledger.ErrNotFound. The query has no RETURNING clause: SQLite
	// reads the id from the connection, where RETURNING would cost a
	// temporary table on every insert.
	InsertID(ctx context.Context, query string, args ...any) (int64, error)
	Enqueue(ctx context.Context, jobs []river.InsertManyParams) error
	// EnqueueFast enqueues jobs on River's fast path: nothing comes
	// back and unique conflicts are errors, not skips. Acceptance uses it
	// for the fresh dispatch jobs of a group.
	EnqueueFast(ctx context.Context, jobs []river.InsertManyParams) error
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// Driver is one database underneath the store.
type Driver interface {
	// Name is "sqlite" or "postgres".
	Name() string
	// Begin opens a write transaction.
	Begin(ctx context.Context) (Tx, error)
	// Reader runs reads; it may be a separate pool.
	Reader() Querier
	// Migrate applies taskgate's and River's migrations.
	Migrate(ctx context.Context) error
	// SchemaVersion is the highest ledger migration the driver embeds,
	// written on every accepted operation (see migration 00006).
	SchemaVersion() int64
	// ForUpdate is the row-locking suffix for a SELECT inside a write
	// transaction ("" where the database serialises writers itself).
	ForUpdate() string
	// ForNoKeyUpdate is the suffix for a SELECT that locks a row the
	// transaction changes but none of whose keys it changes. Unlike
	// ForUpdate it does not conflict with the key-share lock a database
	// takes on a row that a new row references: two transactions that
	// each recorded an attempt of one operation can both go on to lock
	// the operation's chain head, one after the other, instead of
	// deadlocking.
	ForNoKeyUpdate() string
	// AcceptWorkers is how many acceptance batches may commit at once.
	AcceptWorkers() int
	// Retryable reports whether a failed transaction may simply be run
	// again (deadlock, serialisation failure, busy database).
	Retryable(err error) bool
	// Interpret maps driver errors to ledger sentinels where they apply.
	Interpret(err error) error
	Close() error
}
