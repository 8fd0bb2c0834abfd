package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/taskgate/taskgate/internal/pgtest"
	"github.com/taskgate/taskgate/ledger/postgres"
	"github.com/taskgate/taskgate/ledger/storetest"
	"github.com/taskgate/taskgate/secrets"
)

// TestSecrets runs the secrets-at-rest contract on a schema of its own,
// reading the text of every row of every table in it.
func TestSecrets(t *testing.T) {
	storetest.ExerciseSecrets(t, func(t *testing.T) func(*secrets.Ring) storetest.SecretLedger {
		url := pgtest.Schema(t)
		open(t, url, true)
		return func(ring *secrets.Ring) storetest.SecretLedger {
			s, err := postgres.Open(context.Background(), url, &postgres.Options{Secrets: ring})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			db := stdlib.OpenDBFromPool(s.Pool())
			t.Cleanup(func() { db.Close() })
			return storetest.SecretLedger{Store: s, DB: db, Raw: func(t *testing.T) []byte { return tableText(t, s) }}
		}
	})
}

// tableText is every row of every table in the store's schema, as text.
func tableText(t *testing.T, s *postgres.Store) []byte {
	t.Helper()
	ctx := context.Background()
	rows, err := s.Pool().Query(ctx, `SELECT quote_ident(table_name) FROM information_schema.tables WHERE table_schema = current_schema()`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	if rows.Err() != nil || len(tables) == 0 {
		t.Fatalf("list tables: %d, %v", len(tables), rows.Err())
	}
	var all []byte
	for _, table := range tables {
		var text *string
		if err := s.Pool().QueryRow(ctx, `SELECT string_agg(t::text, E'\n') FROM `+table+` t`).Scan(&text); err != nil {
			t.Fatal(err)
		}
		if text != nil {
			all = append(all, *text...)
			all = append(all, '\n')
		}
	}
	return all
}
