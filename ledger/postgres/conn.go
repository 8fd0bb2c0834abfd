package postgres

import (
	"context"
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
type querier struct{ r pgxRunner }

func (q querier) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := q.r.Exec(ctx, query, encode(args)...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (q querier) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	rows, err := q.r.Query(ctx, query, encode(args)...)
	if err != nil {
		return nil, err
	}
	return rows, nil
}

func (q querier) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	return q.r.QueryRow(ctx, query, encode(args)...)
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

func (t *txConn) InsertJobs(ctx context.Context, jobs []river.InsertManyParams) error {
	_, err := t.inserter.InsertManyTx(ctx, t.tx, jobs)
	return err
}

func (t *txConn) InsertJobsFast(ctx context.Context, jobs []river.InsertManyParams) error {
	_, err := t.inserter.InsertManyFastTx(ctx, t.tx, jobs)
	return err
}

func (t *txConn) Commit(ctx context.Context) error   { return t.tx.Commit(ctx) }
func (t *txConn) Rollback(ctx context.Context) error { return t.tx.Rollback(ctx) }
