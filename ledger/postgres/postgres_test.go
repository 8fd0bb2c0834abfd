package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/taskgate/taskgate/internal/pgtest"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/postgres"
	"github.com/taskgate/taskgate/ledger/storetest"
)

func newStore(t *testing.T) ledger.Store {
	t.Helper()
	return open(t, pgtest.Schema(t), true)
}

func open(t *testing.T, url string, migrate bool) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if migrate {
		if err := s.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func TestStore(t *testing.T) {
	storetest.Exercise(t, newStore)
}

// TestChain runs the hash chain contract; its tests change rows directly
// through a database/sql handle on the store's pool.
func TestChain(t *testing.T) {
	storetest.ExerciseChain(t, func(t *testing.T) storetest.Ledger {
		s := open(t, pgtest.Schema(t), true)
		db := stdlib.OpenDBFromPool(s.Pool())
		t.Cleanup(func() { db.Close() })
		return storetest.Ledger{Store: s, DB: db}
	})
}

// TestReplicas runs the contract's replica part: each store has a pool of
// its own on one schema, as separate gateway processes do.
func TestReplicas(t *testing.T) {
	storetest.ExerciseReplicas(t, func(t *testing.T, n int) []ledger.Store {
		url := pgtest.Schema(t)
		stores := make([]ledger.Store, n)
		for i := range stores {
			stores[i] = open(t, url, i == 0)
		}
		return stores
	})
}

func TestOpenUnreachable(t *testing.T) {
	_, err := postgres.Open(context.Background(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=2", nil)
	if err == nil {
		t.Fatal("Open of an unreachable server succeeded")
	}
}
