package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/taskgate/taskgate/providerkit"
	"github.com/taskgate/taskgate/providerkit/sqlitestore"
	"github.com/taskgate/taskgate/providerkit/storetest"
)

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) (providerkit.Store, func() providerkit.Store) {
		path := filepath.Join(t.TempDir(), "jobs.db")
		open := func() providerkit.Store {
			s, err := sqlitestore.Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
		return open(), open
	})
}
