package postgresstore_test

import (
	"context"
	"testing"

	"github.com/taskgate/taskgate/internal/pgtest"
	"github.com/taskgate/taskgate/providerkit"
	"github.com/taskgate/taskgate/providerkit/postgresstore"
	"github.com/taskgate/taskgate/providerkit/storetest"
)

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) (providerkit.Store, func() providerkit.Store) {
		url := pgtest.Schema(t)
		open := func() providerkit.Store {
			s, err := postgresstore.Open(context.Background(), url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
		return open(), open
	})
}
