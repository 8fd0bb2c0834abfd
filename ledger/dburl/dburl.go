// Package dburl opens the ledger store that a --db value names:
// "sqlite:PATH" (optionally "?synchronous=full" or "?synchronous=normal")
// or a postgres:// or postgresql:// URL.
// It holds no state and never decides anything about operations.
package dburl

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/postgres"
	"github.com/taskgate/taskgate/ledger/sqlite"
	"github.com/taskgate/taskgate/secrets"
)

// Default is the ledger used when none is named.
const Default = "sqlite:./taskgate.db"

// Options configure Open.
type Options struct {
	Logger *slog.Logger
	Clock  func() time.Time
	// Migrate applies pending migrations after opening.
	Migrate bool
	// Secrets is the key ring that seals secret argument values; nil
	// keeps them in plain text.
	Secrets *secrets.Ring
}

// Open opens the store named by raw.
func Open(ctx context.Context, raw string, opts *Options) (ledger.Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	var (
		s   ledger.Store
		err error
	)
	switch {
	case strings.HasPrefix(raw, "sqlite:"):
		path, query, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(raw, "sqlite:"), "//"), "?")
		q, perr := url.ParseQuery(query)
		if perr != nil {
			return nil, fmt.Errorf("--db %q: bad options after '?': %w", raw, perr)
		}
		for k := range q {
			if k != "synchronous" {
				return nil, fmt.Errorf("--db %q: unknown sqlite option %q (known: synchronous=full|normal)", raw, k)
			}
		}
		s, err = sqlite.Open(ctx, path, &sqlite.Options{Logger: o.Logger, Clock: o.Clock, Synchronous: q.Get("synchronous"), Secrets: o.Secrets})
	case strings.HasPrefix(raw, "postgres://"), strings.HasPrefix(raw, "postgresql://"):
		s, err = postgres.Open(ctx, raw, &postgres.Options{Logger: o.Logger, Clock: o.Clock, Secrets: o.Secrets})
	default:
		return nil, fmt.Errorf("unsupported --db value %q; try sqlite:./taskgate.db or postgres://user@host:5432/dbname", redact(raw))
	}
	if err != nil {
		return nil, err
	}
	if o.Migrate {
		if err := s.Migrate(ctx); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// redact hides a password in a URL-looking value.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// Describe names the ledger for messages without revealing a password.
func Describe(raw string) string { return redact(raw) }
