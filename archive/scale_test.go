//go:build !race

package archive_test

import "testing"

// The archive at scale: 10,000 ended operations besides those run through
// the gateway. Without the race detector only (make test runs it so), since
// filling the ledger under it takes minutes.

func TestArchiveScaleSQLite(t *testing.T) {
	t.Parallel()
	testArchive(t, "", 10000)
}

func TestArchiveScalePostgres(t *testing.T) {
	t.Parallel()
	testArchive(t, postgresLedger(t), 10000)
}
