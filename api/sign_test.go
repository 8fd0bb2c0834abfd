package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/api"
	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/ledger/sqlite"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/secrets"
	"github.com/taskgate/taskgate/signingkeys"
)

// TestSignedReceipt: with an active signing key the receipt endpoint
// serves signed receipts that verify against the ledger's keys; without
// one, unsigned receipts; with a key it cannot open, an error.
func TestSignedReceipt(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	ring, err := secrets.ParseRing([]byte(secrets.NewKey()), "test keys")
	if err != nil {
		t.Fatal(err)
	}
	authr, err := authn.New(&authn.Options{Store: s, ResourceURL: "http://127.0.0.1/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	serve := func(signer *signingkeys.Signer) *fixture {
		mux := http.NewServeMux()
		api.New(&api.Options{Store: s, Clock: clock, Signer: signer}).Register(mux)
		srv := httptest.NewServer(authr.Middleware(mux))
		t.Cleanup(srv.Close)
		return &fixture{store: s, url: srv.URL}
	}
	key, _, err := authn.NewAPIKey(ctx, s, "acme", "test")
	if err != nil {
		t.Fatal(err)
	}
	completedOperation(t, s, "acme", "settlement-regression-842")
	const path = "/v1/operations/settlement-regression-842/receipt?format=json"
	f := serve(signingkeys.NewSigner(s, ring))

	r := f.do(t, http.MethodGet, path, key, "")
	if r.status != http.StatusOK || strings.Contains(string(r.body), `"signature"`) {
		t.Fatalf("without a signing key: %d %s; want an unsigned receipt", r.status, r.body)
	}

	k, err := signingkeys.Create(ctx, s, ring, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"json", "yaml", "md"} {
		r := f.do(t, http.MethodGet, strings.TrimSuffix(path, "json")+format, key, "")
		if r.status != http.StatusOK || !strings.Contains(string(r.body), k.KeyID) {
			t.Errorf("%s with a signing key: %d %s; want the signature block naming %s", format, r.status, r.body, k.KeyID)
		}
	}
	r = f.do(t, http.MethodGet, path, key, "")
	keys, err := s.SigningKeyList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v, err := receipt.Verify(r.body, signingkeys.PublicKeys(keys))
	if err != nil || !v.OK() || v.KeyID != k.KeyID || !v.SignedAt.Equal(clock()) {
		t.Fatalf("the served receipt: %+v, %v; want it verified, signed by %s at the API clock", v, err, k.KeyID)
	}

	// A gateway without the secrets key that sealed the signing key says
	// so rather than serve an unsigned receipt.
	r = serve(signingkeys.NewSigner(s, nil)).do(t, http.MethodGet, path, key, "")
	if code, msg, _ := apiError(t, r); r.status != http.StatusInternalServerError || code != api.CodeInternal || !strings.Contains(msg, "could not sign the receipt") {
		t.Errorf("with the signing key sealed and no secrets key: %d %s; want 500 could not sign the receipt", r.status, r.body)
	}
}
