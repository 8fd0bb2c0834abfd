package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"

	"github.com/taskgate/taskgate/ledger/internal/sqlstore"
)

// pgxRunner is what *pgxpool.Pool and pgx.Tx share.
type pgxRunner interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// querier adapts pgx to sqlstore.Querier; a zero time.Time becomes NULL.
// A statement whose context sets no deadline gets one of timeout (none
// when timeout is not positive): a database that stopped answering, with
// its connections left hanging, then fails the statement instead of
// holding its caller (an acceptance, a worker, an authentication) forever.
type querier struct {
	r       pgxRunner
	timeout time.Duration
}

// bound gives ctx the querier's deadline unless it has one already.
func (q querier) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return boundContext(ctx, q.timeout)
}

// boundContext gives ctx a deadline timeout from now unless it has one
// already or timeout is not positive.
func boundContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok || timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, timeout)
}

func (q querier) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	ctx, cancel := q.bound(ctx)
	defer cancel()
	tag, err := q.r.Exec(ctx, query, encode(args)...)
	if err != nil {
		return 0, unanswered(ctx, err)
	}
	return tag.RowsAffected(), nil
}

func (q querier) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	ctx, cancel := q.bound(ctx)
	rows, err := q.r.Query(ctx, query, encode(args)...)
	if err != nil {
		cancel()
		return nil, unanswered(ctx, err)
	}
	return &boundRows{Rows: rows, ctx: ctx, cancel: cancel}, nil
}

func (q querier) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	ctx, cancel := q.bound(ctx)
	return &boundRow{row: q.r.QueryRow(ctx, query, encode(args)...), ctx: ctx, cancel: cancel}
}

// boundRows ends its statement's deadline when it is closed.
type boundRows struct {
	pgx.Rows
	ctx    context.Context
	cancel context.CancelFunc
}

func (r *boundRows) Err() error { return unanswered(r.ctx, r.Rows.Err()) }

func (r *boundRows) Close() {
	r.Rows.Close()
	r.cancel()
}

// boundRow ends its statement's deadline once it is scanned.
type boundRow struct {
	row    pgx.Row
	ctx    context.Context
	cancel context.CancelFunc
}

func (r *boundRow) Scan(dest ...any) error {
	defer r.cancel()
	return unanswered(r.ctx, r.row.Scan(dest...))
}

// unanswered says, of an error that came from a statement's deadline,
// that the database did not answer in time.
func unanswered(ctx context.Context, err error) error {
	if err == nil || !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("the database did not answer in time; check that it is up and reachable: %w", err)
}

func encode(args []any) []any {
	var out []any
	for i, a := range args {
		if t, ok := a.(time.Time); ok && t.IsZero() {
			if out == nil {
				out = append([]any(nil), args...)
			}
			out[i] = nil
		}
	}
	if out == nil {
		return args
	}
	return out
}

type txConn struct {
	querier
	tx       pgx.Tx
	inserter *river.Client[pgx.Tx]
}

func (t *txConn) InsertID(ctx context.Context, query string, args ...any) (int64, error) {
	var id int64
	err := t.QueryRow(ctx, query+" RETURNING id", args...).Scan(&id)
	return id, err
}

func (t *txConn) Enqueue(ctx context.Context, jobs []river.InsertManyParams) error {
	ctx, cancel := t.bound(ctx)
	defer cancel()
	_, err := t.inserter.InsertManyTx(ctx, t.tx, jobs)
	return unanswered(ctx, err)
}

func (t *txConn) EnqueueFast(ctx context.Context, jobs []river.InsertManyParams) error {
	ctx, cancel := t.bound(ctx)
	defer cancel()
	_, err := t.inserter.InsertManyFastTx(ctx, t.tx, jobs)
	return unanswered(ctx, err)
}

func (t *txConn) Commit(ctx context.Context) error {
	ctx, cancel := t.bound(ctx)
	defer cancel()
	return unanswered(ctx, t.tx.Commit(ctx))
}

func (t *txConn) Rollback(ctx context.Context) error {
	ctx, cancel := t.bound(ctx)
	defer cancel()
	return unanswered(ctx, t.tx.Rollback(ctx))
}
