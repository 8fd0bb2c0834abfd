package sqlite_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"testing"

	"github.com/taskgate/taskgate/ledger/sqlite"
	"github.com/taskgate/taskgate/ledger/storetest"
	"github.com/taskgate/taskgate/secrets"
)

// TestSecrets runs the secrets-at-rest contract on a ledger file, reading
// the file and its WAL as bytes.
func TestSecrets(t *testing.T) {
	storetest.ExerciseSecrets(t, func(t *testing.T) func(*secrets.Ring) storetest.SecretLedger {
		path := copyTemplate(t)
		return func(ring *secrets.Ring) storetest.SecretLedger {
			s, err := sqlite.Open(context.Background(), path, &sqlite.Options{Secrets: ring})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return storetest.SecretLedger{
				Store: s, DB: s.DB(),
				Raw: func(t *testing.T) []byte { return fileBytes(t, path, path+"-wal") },
				Checkpoint: func(t *testing.T) {
					var busy, log, done int
					if err := s.DB().QueryRow("PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &log, &done); err != nil || busy != 0 {
						t.Fatalf("checkpoint: busy %d, %v", busy, err)
					}
				},
			}
		}
	})
}

func fileBytes(t *testing.T, paths ...string) []byte {
	t.Helper()
	var all []byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}
