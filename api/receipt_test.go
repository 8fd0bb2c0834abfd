package api_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/api"
	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/ledger/sqlite/sqlitetest"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/receipt/issue"
	"github.com/taskgate/taskgate/secrets"
	"github.com/taskgate/taskgate/signingkeys"
)

// TestIssuedReceipt: the receipt endpoint serves a provisional receipt
// until the receipt is issued, then the issued version as stored, the
// same bytes on every read, from a gateway that holds no secrets key.
func TestIssuedReceipt(t *testing.T) {
	ctx := context.Background()
	s := sqlitetest.Open(t)
	ring, err := secrets.ParseRing([]byte(secrets.NewKey()), "test keys")
	if err != nil {
		t.Fatal(err)
	}
	authr, err := authn.New(&authn.Options{Store: s, ResourceURL: "http://127.0.0.1/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	api.New(&api.Options{Store: s, Clock: clock}).Register(mux)
	srv := httptest.NewServer(authr.Middleware(mux))
	t.Cleanup(srv.Close)
	f := &fixture{store: s, url: srv.URL}
	key, _, err := authn.NewAPIKey(ctx, s, "acme", "test")
	if err != nil {
		t.Fatal(err)
	}
	op := completedOperation(t, s, "acme", "settlement-regression-842")
	const path = "/v1/operations/settlement-regression-842/receipt?format="

	r := f.do(t, http.MethodGet, path+"json", key, "")
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"provisional": true`) {
		t.Fatalf("before the receipt is issued: %d %s; want a provisional receipt", r.status, r.body)
	}
	r = f.do(t, http.MethodGet, path+"dsse", key, "")
	if code, msg, _ := apiError(t, r); r.status != http.StatusConflict || code != api.CodeConflict || !strings.Contains(msg, "not issued yet") {
		t.Errorf("the DSSE form before issue: %d %s; want 409 not issued yet", r.status, r.body)
	}
	r = f.do(t, http.MethodGet, path+"sigstore-bundle", key, "")
	if code, msg, _ := apiError(t, r); r.status != http.StatusConflict || code != api.CodeConflict || !strings.Contains(msg, "not issued yet") {
		t.Errorf("the Sigstore bundle before issue: %d %s; want 409 not issued yet", r.status, r.body)
	}

	k, err := signingkeys.Create(ctx, s, ring, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := issue.New(s, ring).Issue(ctx, op, nil)
	if err != nil || res.Outcome != issue.Issued {
		t.Fatalf("issue: %+v, %v", res, err)
	}
	for _, format := range []string{"json", "yaml", "md", "dsse", "sigstore-bundle"} {
		a := f.do(t, http.MethodGet, path+format, key, "")
		b := f.do(t, http.MethodGet, path+format, key, "")
		if a.status != http.StatusOK || !bytes.Equal(a.body, b.body) {
			t.Errorf("%s: %d, two reads alike %v; want the issued receipt, the same bytes each time", format, a.status, bytes.Equal(a.body, b.body))
		}
		if format != "dsse" && format != "sigstore-bundle" && (!strings.Contains(string(a.body), k.KeyID) || strings.Contains(string(a.body), "provisional")) {
			t.Errorf("%s: %s; want the issued version naming key %s", format, a.body, k.KeyID)
		}
	}
	r = f.do(t, http.MethodGet, path+"dsse", key, "")
	if !bytes.Equal(r.body, res.Version.Document) || r.header.Get("Content-Type") != "application/vnd.dsse.envelope.v1+json" {
		t.Fatalf("the DSSE form is not the issued document (%s)", r.header.Get("Content-Type"))
	}
	keys, err := s.SigningKeyList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v, err := receipt.VerifyEnvelope(ctx, r.body, signingkeys.PublicKeys(keys))
	if err != nil || !v.OK() || v.KeyID != k.KeyID {
		t.Fatalf("the served receipt: %+v, %v; want it verified, signed by %s", v, err, k.KeyID)
	}

	// The bundle is the one the CLI writes, and verifies as one.
	r = f.do(t, http.MethodGet, path+"sigstore-bundle", key, "")
	want, err := receipt.Bundle(res.Version.Document, res.Version.KeyID)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.body, want) || r.header.Get("Content-Type") != receipt.BundleMediaType {
		t.Fatalf("the Sigstore bundle form (%s) is not the issued document's bundle:\n%s", r.header.Get("Content-Type"), r.body)
	}
	bv, err := receipt.VerifyBundle(ctx, r.body, signingkeys.PublicKeys(keys))
	if err != nil || !bv.OK() || bv.KeyID != k.KeyID || bv.Form != receipt.FormBundle {
		t.Fatalf("the served bundle: %+v, %v; want it verified, signed by %s", bv, err, k.KeyID)
	}
}
