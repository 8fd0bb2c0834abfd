// Package jobsql is the providerkit job store over database/sql, for the
// SQLite and PostgreSQL stores, which differ only in their driver,
// placeholders and migrations. It never opens a database itself.
package jobsql

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/providerkit"
)

// Store implements providerkit.Store on a database whose schema the
// migrations of sqlitestore or postgresstore made.
type Store struct {
	db *sql.DB
	// numbered says the driver takes $1, $2, … rather than ?.
	numbered bool
}

// New returns the store on db; numbered is true for PostgreSQL.
func New(db *sql.DB, numbered bool) *Store { return &Store{db: db, numbered: numbered} }

// Migrate brings db's job store tables up to the migrations in fsys, with
// goose's version table of its own, so that a server may keep its jobs in
// a database it also uses for other things.
func Migrate(ctx context.Context, db *sql.DB, dialect goose.Dialect, fsys fs.FS, opts ...goose.ProviderOption) error {
	sub, err := fs.Sub(fsys, "migrations")
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(dialect, db, sub, append(opts, goose.WithTableName("providerkit_schema"))...)
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate the job store: %w", err)
	}
	return nil
}

// q writes query's ? placeholders as the driver wants them.
func (s *Store) q(query string) string {
	if !s.numbered {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

const jobColumns = "id, idempotency_key, tool, arguments, status, result, error, created_at, updated_at"

func micros(t time.Time) int64 { return t.UnixMicro() }

func (s *Store) Start(ctx context.Context, id, key, tool string, arguments json.RawMessage, now time.Time) (*providerkit.Job, bool, error) {
	res, err := s.db.ExecContext(ctx, s.q(`INSERT INTO providerkit_jobs (`+jobColumns+`)
		VALUES (?, ?, ?, ?, ?, '', '', ?, ?) ON CONFLICT (idempotency_key) DO NOTHING`),
		id, key, tool, string(arguments), string(providerkit.StatusRunning), micros(now), micros(now))
	if err != nil {
		return nil, false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, false, err
	}
	jobs, err := s.JobsByKey(ctx, key)
	if err != nil {
		return nil, false, err
	}
	if len(jobs) == 0 {
		return nil, false, fmt.Errorf("the job of key %q was recorded but cannot be read back", key)
	}
	return jobs[0], n == 1, nil
}

func (s *Store) Job(ctx context.Context, id string) (*providerkit.Job, error) {
	j, err := scanJob(s.db.QueryRowContext(ctx, s.q(`SELECT `+jobColumns+` FROM providerkit_jobs WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, providerkit.ErrNotFound
	}
	return j, err
}

func (s *Store) JobsByKey(ctx context.Context, key string) ([]*providerkit.Job, error) {
	return s.jobs(ctx, `SELECT `+jobColumns+` FROM providerkit_jobs WHERE idempotency_key = ? ORDER BY created_at, id`, key)
}

func (s *Store) Unended(ctx context.Context) ([]*providerkit.Job, error) {
	return s.jobs(ctx, `SELECT `+jobColumns+` FROM providerkit_jobs WHERE status = ? ORDER BY created_at, id`, string(providerkit.StatusRunning))
}

func (s *Store) End(ctx context.Context, id string, status providerkit.Status, result json.RawMessage, errText string, now time.Time) (*providerkit.Job, error) {
	if !status.Ended() {
		return nil, fmt.Errorf("%q is not a status a job ends in", status)
	}
	if _, err := s.db.ExecContext(ctx, s.q(`UPDATE providerkit_jobs SET status = ?, result = ?, error = ?, updated_at = ?
		WHERE id = ? AND status = ?`), string(status), string(result), errText, micros(now), id, string(providerkit.StatusRunning)); err != nil {
		return nil, err
	}
	return s.Job(ctx, id)
}

func (s *Store) RecordCharge(ctx context.Context, c *providerkit.Charge, now time.Time) error {
	res, err := s.db.ExecContext(ctx, s.q(`INSERT INTO providerkit_charges (id, job_id, amount_micros, currency, kind, status, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET amount_micros = excluded.amount_micros, currency = excluded.currency,
			kind = excluded.kind, status = excluded.status, updated_at = excluded.updated_at
		WHERE providerkit_charges.job_id = excluded.job_id`),
		c.ID, c.JobID, c.Amount.Micros, c.Amount.Currency, c.Kind, string(c.Status), micros(now), micros(now))
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return fmt.Errorf("charge ID %q belongs to another job; give each job's charges IDs of their own", c.ID)
	}
	return nil
}

func (s *Store) Charges(ctx context.Context, jobID string) ([]*providerkit.Charge, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT id, job_id, amount_micros, currency, kind, status, created_at, updated_at
		FROM providerkit_charges WHERE job_id = ? ORDER BY created_at, id`), jobID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*providerkit.Charge
	for rows.Next() {
		var c providerkit.Charge
		var amount, created, updated int64
		var currency, status string
		if err := rows.Scan(&c.ID, &c.JobID, &amount, &currency, &c.Kind, &status, &created, &updated); err != nil {
			return nil, err
		}
		c.Amount, c.Status = money.FromMicros(amount, currency), providerkit.ChargeStatus(status)
		c.CreatedAt, c.UpdatedAt = time.UnixMicro(created), time.UnixMicro(updated)
		out = append(out, &c)
	}
	return out, rows.Err()
}

func (s *Store) jobs(ctx context.Context, query string, args ...any) ([]*providerkit.Job, error) {
	rows, err := s.db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*providerkit.Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

type scanner interface{ Scan(dest ...any) error }

func scanJob(row scanner) (*providerkit.Job, error) {
	var j providerkit.Job
	var args, status, result string
	var created, updated int64
	if err := row.Scan(&j.ID, &j.Key, &j.Tool, &args, &status, &result, &j.Error, &created, &updated); err != nil {
		return nil, err
	}
	j.Arguments, j.Status = json.RawMessage(args), providerkit.Status(status)
	if result != "" {
		j.Result = json.RawMessage(result)
	}
	j.CreatedAt, j.UpdatedAt = time.UnixMicro(created), time.UnixMicro(updated)
	return &j, nil
}
