// Package pgtest gives tests a fresh PostgreSQL schema of their own on the
// server named by TASKGATE_TEST_POSTGRES_URL, reached directly or through a
// TCP proxy the test controls, and drops it afterwards.
// Without that variable, tests that need PostgreSQL are skipped with a
// visible notice. It must never be imported by production code.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskgate/taskgate/internal/tcpproxy"
)

// EnvURL is the environment variable naming the test server.
const EnvURL = "TASKGATE_TEST_POSTGRES_URL"

// BaseURL returns the server URL or skips the test with a notice.
func BaseURL(t testing.TB) string {
	t.Helper()
	base := getenv(EnvURL)
	if base == "" {
		t.Skipf("SKIP PostgreSQL: set %s (e.g. postgres://postgres@127.0.0.1:5432/test) to run this test", EnvURL)
	}
	return base
}

// Schema creates a new schema and returns a URL whose connections use it.
// The schema is dropped when the test ends.
func Schema(t testing.TB) string {
	t.Helper()
	base := BaseURL(t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "tg_test_" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("PostgreSQL at %s is not reachable: %v", EnvURL, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatalf("create schema %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+name+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s is not a URL: %v", EnvURL, err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String()
}

// SchemaBehindProxy creates a schema as Schema does and returns two URLs
// of it: direct, and proxied through a TCP proxy the test controls, to cut
// or stall the database without touching the server. The proxy closes
// when the test ends.
func SchemaBehindProxy(t testing.TB) (direct, proxied string, proxy *tcpproxy.Proxy) {
	t.Helper()
	direct = Schema(t)
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatalf("parse the schema's URL: %v", err)
	}
	if proxy, err = tcpproxy.Start(u.Host); err != nil {
		t.Fatalf("start a proxy to %s: %v", u.Host, err)
	}
	t.Cleanup(func() { proxy.Close() })
	u.Host = proxy.Addr()
	return direct, u.String(), proxy
}
