package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
)

type plainArgs struct {
	N int `json:"n"`
}

func (plainArgs) Kind() string { return "test_plain" }

type uniqueArgs struct {
	N int `json:"n"`
}

func (uniqueArgs) Kind() string { return "test_unique" }

func (uniqueArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// jobRow is every column of river_job but id, with JSON as stored.
type jobRow struct {
	Args, Kind, Metadata, Queue, State, Tags string
	CreatedAt, ScheduledAt                   string
	Attempt, MaxAttempts, Priority           int
	AttemptedAt, AttemptedBy, Errors         sql.NullString
	FinalizedAt, UniqueKey                   sql.NullString
	UniqueStates                             sql.NullInt64
}

func jobRows(t *testing.T, db *sql.DB, afterID int64) ([]jobRow, int64) {
	t.Helper()
	rows, err := db.Query(`SELECT id, hex(args), kind, hex(metadata), queue, state, hex(tags), created_at || '', scheduled_at || '',
		attempt, max_attempts, priority, attempted_at || '', hex(attempted_by), hex(errors), finalized_at || '', hex(unique_key), unique_states
		FROM river_job WHERE id > $1 ORDER BY id`, afterID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []jobRow
	last := afterID
	for rows.Next() {
		var r jobRow
		if err := rows.Scan(&last, &r.Args, &r.Kind, &r.Metadata, &r.Queue, &r.State, &r.Tags, &r.CreatedAt, &r.ScheduledAt,
			&r.Attempt, &r.MaxAttempts, &r.Priority, &r.AttemptedAt, &r.AttemptedBy, &r.Errors, &r.FinalizedAt, &r.UniqueKey, &r.UniqueStates); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out, last
}

// The inserter must write exactly the rows River's own driver writes, so
// that River's workers, fetches and unique checks read them the same.
func TestJobInsertWritesWhatRiverWrites(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	db := s.DB()
	theirs, err := river.NewClient(riversqlite.New(db), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ours, err := river.NewClient(insertDriver{riversqlite.New(db)}, &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	insert := func(t *testing.T, c *river.Client[*sql.Tx], jobs []river.InsertManyParams) {
		t.Helper()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		n, err := c.InsertManyFastTx(ctx, tx, jobs)
		if err != nil {
			t.Fatal(err)
		}
		if n != len(jobs) {
			t.Fatalf("inserted %d of %d jobs", n, len(jobs))
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	later := time.Now().Add(time.Hour)
	many := func(n int) []river.InsertManyParams {
		jobs := make([]river.InsertManyParams, n)
		for i := range jobs {
			jobs[i] = river.InsertManyParams{Args: plainArgs{N: i}}
		}
		return jobs
	}
	cases := []struct {
		name string
		jobs []river.InsertManyParams
	}{
		{"defaults", many(1)},
		{"options", []river.InsertManyParams{{Args: plainArgs{N: 7}, InsertOpts: &river.InsertOpts{
			Queue: "other", Priority: 3, MaxAttempts: 7, Tags: []string{"alpha", "beta"}, Metadata: []byte(`{"k":"v"}`),
		}}}},
		{"scheduled", []river.InsertManyParams{{Args: plainArgs{N: 1}, InsertOpts: &river.InsertOpts{ScheduledAt: later}}}},
		{"pending", []river.InsertManyParams{{Args: plainArgs{N: 2}, InsertOpts: &river.InsertOpts{Pending: true}}}},
		{"a group in chunks", many(71)},
		{"unique", []river.InsertManyParams{{Args: uniqueArgs{N: 1}}}},
	}
	var last int64
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var want, got []jobRow
			before := time.Now().UTC().Add(-time.Second).Format("2006-01-02 15:04:05.000")
			insert(t, theirs, tc.jobs)
			want, last = jobRows(t, db, last)
			if _, err := db.Exec(`DELETE FROM river_job`); err != nil {
				t.Fatal(err)
			}
			insert(t, ours, tc.jobs)
			got, last = jobRows(t, db, last)
			if len(got) != len(tc.jobs) || len(want) != len(tc.jobs) {
				t.Fatalf("River wrote %d rows and the inserter %d, want %d each", len(want), len(got), len(tc.jobs))
			}
			for i := range got {
				// Times River leaves to the database are now: check their
				// form, not their value.
				for _, r := range []*jobRow{&want[i], &got[i]} {
					if r.CreatedAt < before || len(r.CreatedAt) != len(before) {
						t.Fatalf("created_at %q is not a time after %q in River's form", r.CreatedAt, before)
					}
					r.CreatedAt = ""
					if tc.name != "scheduled" {
						if r.ScheduledAt < before || len(r.ScheduledAt) != len(before) {
							t.Fatalf("scheduled_at %q is not a time after %q in River's form", r.ScheduledAt, before)
						}
						r.ScheduledAt = ""
					}
				}
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Fatalf("job %d:\ninserter %+v\nRiver    %+v", i, got[i], want[i])
				}
			}
			if _, err := db.Exec(`DELETE FROM river_job`); err != nil {
				t.Fatal(err)
			}
		})
	}

	// A unique job goes through River's own statement, which skips the
	// second insert of the same arguments.
	insert(t, ours, []river.InsertManyParams{{Args: uniqueArgs{N: 9}}})
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ours.InsertManyFastTx(ctx, tx, []river.InsertManyParams{{Args: uniqueArgs{N: 9}}}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM river_job WHERE kind = 'test_unique'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("%d unique jobs with the same arguments, want 1", n)
	}
}
