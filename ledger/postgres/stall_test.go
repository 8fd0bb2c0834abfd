package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/pgtest"
	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/postgres"
)

// A database whose connections hang fails reads and writes that set no
// deadline after the statement timeout, instead of holding them until TCP
// gives up; once the network heals the store works again.
func TestStatementTimeoutWhenTheNetworkStalls(t *testing.T) {
	_, ledgerURL, proxy := pgtest.SchemaBehindProxy(t)

	const timeout = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := postgres.Open(ctx, ledgerURL, &postgres.Options{StatementTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	key := &ledger.APIKey{Tenant: "acme", Hash: strings.Repeat("ab", 32)}
	if _, err := s.KeyCreate(ctx, key); err != nil {
		t.Fatalf("create a key before the stall: %v", err)
	}

	proxy.Stall()
	// A read outside a transaction is allowed ten times a write's bound; a
	// write may wait for a connection and then for its statement. Either
	// then has its connection dropped a second after the server was asked
	// to cancel.
	for _, c := range []struct {
		name  string
		bound time.Duration
		call  func() error
	}{
		{"a read", 10*timeout + 2*time.Second, func() error {
			_, err := s.KeyByHash(context.Background(), key.Hash)
			return err
		}},
		{"a write", 10*timeout + 2*time.Second, func() error {
			_, err := s.KeyCreate(context.Background(), &ledger.APIKey{Tenant: "acme", Hash: strings.Repeat("cd", 32)})
			return err
		}},
	} {
		start := time.Now()
		err := c.call()
		took := time.Since(start)
		if err == nil || errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("%s while the network stalls = %v; want an error", c.name, err)
		} else if !strings.Contains(err.Error(), "did not answer in time") {
			t.Errorf("%s while the network stalls = %q; want it to say the database did not answer in time", c.name, err)
		}
		if took > c.bound {
			t.Errorf("%s while the network stalls failed after %s; want at most %s", c.name, took, c.bound)
		}
	}

	proxy.Restore()
	testwait.Until(t, ctx, "the store to answer again after the network healed", func() (bool, error) {
		_, err := s.KeyByHash(ctx, key.Hash)
		return err == nil, err
	})
}
