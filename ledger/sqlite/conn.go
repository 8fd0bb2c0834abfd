package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/riverqueue/river"

	"github.com/taskgate/taskgate/ledger/internal/sqlstore"
)

// sqlRunner is what *sql.DB and *sql.Tx share.
type sqlRunner interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// querier adapts database/sql to sqlstore.Querier, storing times as Unix
// microseconds so that they order and compare as integers.
type querier struct{ r sqlRunner }

func (q querier) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := q.r.ExecContext(ctx, query, encode(args)...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (q querier) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	rows, err := q.r.QueryContext(ctx, query, encode(args)...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

func (q querier) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	return q.r.QueryRowContext(ctx, query, encode(args)...)
}

type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { _ = r.Rows.Close() }

func encode(args []any) []any {
	var out []any
	for i, a := range args {
		t, ok := a.(time.Time)
		if !ok {
			continue
		}
		if out == nil {
			out = append([]any(nil), args...)
		}
		if t.IsZero() {
			out[i] = nil
		} else {
			out[i] = t.UnixMicro()
		}
	}
	if out == nil {
		return args
	}
	return out
}

type txConn struct {
	querier
	tx       *sql.Tx
	inserter *river.Client[*sql.Tx]
}

func (t *txConn) InsertID(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := t.tx.ExecContext(ctx, query, encode(args)...)
	if err != nil {
		return 0, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return 0, cmpOr(err, sql.ErrNoRows)
	}
	return res.LastInsertId()
}

func (t *txConn) Enqueue(ctx context.Context, jobs []river.InsertManyParams) error {
	_, err := t.inserter.InsertManyTx(ctx, t.tx, jobs)
	return err
}

func (t *txConn) EnqueueFast(ctx context.Context, jobs []river.InsertManyParams) error {
	_, err := t.inserter.InsertManyFastTx(ctx, t.tx, jobs)
	return err
}

func (t *txConn) Commit(context.Context) error   { return t.tx.Commit() }
func (t *txConn) Rollback(context.Context) error { return t.tx.Rollback() }
