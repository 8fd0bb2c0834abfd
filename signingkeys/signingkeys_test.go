package signingkeys

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/sqlite"
	"github.com/taskgate/taskgate/ledger/sqlite/sqlitetest"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/secrets"
)

func newRing(t *testing.T, keys ...string) *secrets.Ring {
	t.Helper()
	r, err := secrets.ParseRing([]byte(strings.Join(keys, "\n")), "test keys")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var signedAt = time.Date(2026, 5, 4, 10, 10, 0, 0, time.UTC)

// aReceipt is a small receipt built from ledger data.
func aReceipt(id string) *receipt.Receipt {
	return receipt.Build(&receipt.Input{
		Operation: &ledger.Operation{
			ID: 1, Tenant: "acme", OperationID: id, TaskID: "task-1", Upstream: "hosted_test", Tool: "run_suite",
			State: ledger.StateCompleted, Estimate: money.MustParse("18.00", "USD"), IntendedRemoteJobs: 1,
			ChainHead: strings.Repeat("ab", 32),
		},
		Now: signedAt,
	})
}

// signAndVerify signs a receipt with s and verifies its JSON against keys.
func signAndVerify(t *testing.T, s *Signer, keys receipt.PublicKeys) *receipt.Verification {
	t.Helper()
	r := aReceipt("op-1")
	signed, err := s.Sign(context.Background(), r, signedAt)
	if err != nil || !signed {
		t.Fatalf("Sign = %v, %v; want signed", signed, err)
	}
	doc, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	v, err := receipt.Verify(doc, keys)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestKeyLifecycle(t *testing.T) {
	for _, alg := range []ledger.SigningAlgorithm{ledger.SigningEdDSA, ledger.SigningES256} {
		t.Run(string(alg), func(t *testing.T) { keyLifecycle(t, alg) })
	}
}

// keyLifecycle creates, signs with and retires keys for alg.
func keyLifecycle(t *testing.T, alg ledger.SigningAlgorithm) {
	ctx := context.Background()
	store := sqlitetest.Open(t)
	ring := newRing(t, secrets.NewKey())
	signer := NewSigner(store, ring)

	// Without a key, receipts stay unsigned.
	r := aReceipt("op-0")
	if signed, err := signer.Sign(ctx, r, signedAt); err != nil || signed || r.Signature != nil {
		t.Fatalf("Sign without a key = %v, %v, signature %v; want unsigned", signed, err, r.Signature)
	}
	if _, err := CreateWith(ctx, store, nil, alg, time.Time{}); !errors.Is(err, ErrNoRing) {
		t.Fatalf("Create without a ring = %v, want ErrNoRing", err)
	}

	first, err := CreateWith(ctx, store, ring, alg, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := PublicKey(first)
	if err != nil {
		t.Fatal(err)
	}
	if kid, _ := receipt.KeyID(pub); first.Algorithm != alg || first.KeyID != kid || !first.Active() || SealedWith(first) != ring.Newest() {
		t.Errorf("created %+v; want kid the thumbprint %s, active, sealed with %s", first, kid, ring.Newest())
	}
	v := signAndVerify(t, signer, PublicKeys(list(t, store)))
	if !v.OK() || v.KeyID != first.KeyID || v.Algorithm != alg {
		t.Fatalf("signed with the first key: %+v; want it verified as signed with %s", v, alg)
	}
	// The issued form: a DSSE envelope over the receipt's statement.
	st, err := receipt.Statement(aReceipt("op-env"), receipt.Issue{Version: 1})
	if err != nil {
		t.Fatal(err)
	}
	env, kid, err := signer.Envelope(ctx, st)
	if err != nil || kid != first.KeyID {
		t.Fatalf("Envelope = %v, %q; want signed by %s", err, kid, first.KeyID)
	}
	if v, err := receipt.VerifyEnvelope(ctx, env, PublicKeys(list(t, store))); err != nil || !v.OK() || v.KeyID != first.KeyID || v.Algorithm != alg {
		t.Fatalf("VerifyEnvelope = %+v, %v; want it verified as signed by %s with %s", v, err, first.KeyID, alg)
	}

	// The newest active key signs.
	second, err := CreateWith(ctx, store, ring, alg, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if v := signAndVerify(t, signer, PublicKeys(list(t, store))); !v.OK() || v.KeyID != second.KeyID {
		t.Fatalf("with two keys: %+v; want signed by the newer %s", v, second.KeyID)
	}

	// A receipt signed by a key that is then retired still verifies
	// against the published keys; the retired key signs no more.
	r = aReceipt("op-2")
	if _, err := signer.Sign(ctx, r, signedAt); err != nil {
		t.Fatal(err)
	}
	bySecond, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	retired, err := Retire(ctx, store, second.KeyID, time.Time{})
	if err != nil || retired.Active() || retired.SealedPrivateKey != "" {
		t.Fatalf("Retire = %+v, %v; want retired with its private part erased", retired, err)
	}
	jwks, err := JWKS(list(t, store))
	if err != nil {
		t.Fatal(err)
	}
	published, err := ParseJWKS(jwks, "the published set")
	if err != nil {
		t.Fatal(err)
	}
	if len(published) != 2 {
		t.Errorf("published %d keys, want both, the retired one too", len(published))
	}
	if v, err := receipt.Verify(bySecond, published); err != nil || !v.OK() || v.KeyID != second.KeyID {
		t.Errorf("a receipt signed by the retired key: %+v, %v; want it to verify", v, err)
	}
	if v := signAndVerify(t, signer, published); !v.OK() || v.KeyID != first.KeyID {
		t.Errorf("after retiring the newer key: %+v; want signed by %s", v, first.KeyID)
	}
	if _, err := Retire(ctx, store, "no-such-kid", time.Time{}); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("retiring an unknown key: %v, want ErrNotFound", err)
	}

	// A receipt signed by another ledger's key is not verified by this
	// one's keys.
	other := sqlitetest.Open(t)
	if _, err := CreateWith(ctx, other, ring, alg, time.Time{}); err != nil {
		t.Fatal(err)
	}
	v = signAndVerify(t, NewSigner(other, ring), published)
	if v.OK() || len(v.Problems) != 1 || v.Problems[0].Kind != receipt.ProblemKey {
		t.Errorf("a receipt signed by an unknown key: %v; want one key problem", v.Problems)
	}

	// With every key retired, receipts are unsigned again.
	if _, err := Retire(ctx, store, first.KeyID, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if signed, err := signer.Sign(ctx, aReceipt("op-3"), signedAt); err != nil || signed {
		t.Errorf("Sign with every key retired = %v, %v; want unsigned", signed, err)
	}
}

func list(t *testing.T, s ledger.Store) []*ledger.SigningKey {
	t.Helper()
	keys, err := s.SigningKeyList(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// The private part is kept sealed: the ledger's file never holds it, and
// only the ring that sealed it, for this key ID, opens it.
func TestPrivateKeySealed(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store, err := sqlite.Open(ctx, filepath.Join(dir, "ledger.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	ring := newRing(t, secrets.NewKey())
	k, err := Create(ctx, store, ring, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	seed, err := ring.OpenBytes(k.SealedPrivateKey, label(k.KeyID))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(k.SealedPrivateKey, string(seed)) {
		t.Fatal("the sealed private key holds the seed")
	}
	var files []byte
	for _, name := range []string{"ledger.db", "ledger.db-wal"} {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		files = append(files, b...)
	}
	if len(files) == 0 || bytes.Contains(files, seed) {
		t.Fatalf("the ledger's files (%d bytes) hold the private key's seed", len(files))
	}

	// No ring, or one without the key that sealed it: the signer says so.
	for name, tc := range map[string]struct {
		ring *secrets.Ring
		want error
	}{
		"no ring":    {nil, ErrNoRing},
		"other ring": {newRing(t, secrets.NewKey()), secrets.ErrOpenBytes},
	} {
		_, err := NewSigner(store, tc.ring).Sign(ctx, aReceipt("op-1"), signedAt)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), k.KeyID) {
			t.Errorf("%s: Sign = %v; want %v naming key %s", name, err, tc.want, k.KeyID)
		}
	}

	// A row whose sealed part was made for another key ID, or holds
	// another key, does not sign.
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	kid, _ := receipt.KeyID(pub)
	for name, sealed := range map[string]string{
		"sealed for another key ID": ring.SealBytes(priv.Seed(), label(k.KeyID)),
		"another key's seed":        ring.SealBytes(seed, label(kid)),
	} {
		t.Run(name, func(t *testing.T) {
			s := sqlitetest.Open(t)
			if _, err := s.SigningKeyCreate(ctx, &ledger.SigningKey{KeyID: kid, Algorithm: ledger.SigningEdDSA, PublicKey: pub, SealedPrivateKey: sealed}); err != nil {
				t.Fatal(err)
			}
			if signed, err := NewSigner(s, ring).Sign(ctx, aReceipt("op-1"), signedAt); err == nil || signed {
				t.Errorf("Sign = %v, %v; want it refused", signed, err)
			}
		})
	}
}

func TestParseJWKS(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	kid, _ := receipt.KeyID(pub)
	good, err := JWKS([]*ledger.SigningKey{{KeyID: kid, Algorithm: ledger.SigningEdDSA, PublicKey: pub}})
	if err != nil {
		t.Fatal(err)
	}
	var set map[string][]map[string]any
	if err := json.Unmarshal(good, &set); err != nil {
		t.Fatal(err)
	}
	k := set["keys"][0]
	if k["kty"] != "OKP" || k["crv"] != "Ed25519" || k["kid"] != kid || k["alg"] != "EdDSA" || k["use"] != "sig" || k["d"] != nil {
		t.Errorf("JWK %v; want an OKP Ed25519 public key with kid, alg EdDSA and use sig", k)
	}
	keys, err := ParseJWKS(good, "good")
	if err != nil || !pub.Equal(keys[kid]) {
		t.Fatalf("ParseJWKS = %v, %v; want the key under %s", keys, err, kid)
	}

	renamed := bytes.Replace(good, []byte(kid), []byte(strings.Repeat("x", len(kid))), 1)
	withPrivate := bytes.Replace(good, []byte(`"kty"`), []byte(`"d": "`+base64.RawURLEncoding.EncodeToString(priv.Seed())+`", "kty"`), 1)
	for name, tc := range map[string]struct {
		b    []byte
		want string
	}{
		"not JSON":          {[]byte("keys: []"), "is not a JWK Set"},
		"another key's kid": {renamed, "but its thumbprint is " + kid},
		"a private key":     {withPrivate, "is neither an Ed25519 nor an ECDSA P-256 public key"},
		"an RSA key":        {[]byte(`{"keys":[{"kty":"RSA","kid":"r","n":"sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw","e":"AQAB"}]}`), "is neither an Ed25519 nor an ECDSA P-256 public key"},
	} {
		if _, err := ParseJWKS(tc.b, "the set"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: ParseJWKS = %v, want an error saying %q", name, err, tc.want)
		}
	}
}

// An ECDSA P-256 key is published as an EC JWK and a PKIX PEM key, and a
// set that misnames its algorithm or uses another curve is refused.
func TestECDSAPublicKeys(t *testing.T) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := priv.PublicKey.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	kid, _ := receipt.KeyID(&priv.PublicKey)
	k := &ledger.SigningKey{KeyID: kid, Algorithm: ledger.SigningES256, PublicKey: raw}
	good, err := JWKS([]*ledger.SigningKey{k})
	if err != nil {
		t.Fatal(err)
	}
	var set map[string][]map[string]any
	if err := json.Unmarshal(good, &set); err != nil {
		t.Fatal(err)
	}
	if j := set["keys"][0]; j["kty"] != "EC" || j["crv"] != "P-256" || j["kid"] != kid || j["alg"] != "ES256" || j["use"] != "sig" || j["d"] != nil {
		t.Errorf("JWK %v; want an EC P-256 public key with kid, alg ES256 and use sig", j)
	}
	keys, err := ParseJWKS(good, "good")
	if err != nil || !priv.PublicKey.Equal(keys[kid]) {
		t.Fatalf("ParseJWKS = %v, %v; want the key under %s", keys, err, kid)
	}
	p, err := PEM([]*ledger.SigningKey{k})
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(p)
	if block == nil {
		t.Fatalf("PEM wrote no block:\n%s", p)
	}
	if pub, err := x509.ParsePKIXPublicKey(block.Bytes); err != nil || !priv.PublicKey.Equal(pub) {
		t.Errorf("the PEM block holds %v, %v; want the P-256 public key", pub, err)
	}

	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	other, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &p384.PublicKey, KeyID: "p384", Algorithm: "ES384"}}})
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		b    []byte
		want string
	}{
		"alg EdDSA on an EC key": {bytes.Replace(good, []byte(`"ES256"`), []byte(`"EdDSA"`), 1), `says alg "EdDSA", but it is a key for ES256`},
		"a P-384 key":            {other, "is neither an Ed25519 nor an ECDSA P-256 public key"},
	} {
		if _, err := ParseJWKS(tc.b, "the set"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: ParseJWKS = %v, want an error saying %q", name, err, tc.want)
		}
	}
	if _, err := PublicKey(&ledger.SigningKey{KeyID: "short", Algorithm: ledger.SigningES256, PublicKey: raw[:33]}); err == nil {
		t.Error("PublicKey read a truncated P-256 point")
	}
}

func TestParseAlgorithm(t *testing.T) {
	for name, want := range map[string]ledger.SigningAlgorithm{"ed25519": ledger.SigningEdDSA, "ECDSA-P256": ledger.SigningES256, "rsa": "", "": ""} {
		got, err := ParseAlgorithm(name)
		if got != want || (err == nil) != (want != "") {
			t.Errorf("ParseAlgorithm(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
}

// failingList is a ledger whose signing keys cannot be read.
type failingList struct{ ledger.Store }

func (failingList) SigningKeyList(context.Context) ([]*ledger.SigningKey, error) {
	return nil, errors.New("the database is gone")
}

func TestHandlerAndLoad(t *testing.T) {
	ctx := context.Background()
	store := sqlitetest.Open(t)
	k, err := Create(ctx, store, newRing(t, secrets.NewKey()), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(JWKSPath, Handler(store, nil))
	mux.Handle("/broken", Handler(failingList{store}, nil))
	mux.HandleFunc("/huge", func(w http.ResponseWriter, _ *http.Request) { w.Write(bytes.Repeat([]byte(" "), MaxJWKSBytes+1)) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	res, err := http.Get(srv.URL + JWKSPath)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/jwk-set+json" {
		t.Errorf("GET %s: %s, %s; want 200 application/jwk-set+json", JWKSPath, res.Status, res.Header.Get("Content-Type"))
	}
	keys, err := LoadJWKS(ctx, srv.URL+JWKSPath, nil)
	if err != nil || !ed25519.PublicKey(k.PublicKey).Equal(keys[k.KeyID]) {
		t.Fatalf("LoadJWKS(URL) = %v, %v; want key %s", keys, err, k.KeyID)
	}
	res, err = http.Post(srv.URL+JWKSPath, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST %s: %s, want 405", JWKSPath, res.Status)
	}

	jwks, err := JWKS(list(t, store))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(path, jwks, 0o644); err != nil {
		t.Fatal(err)
	}
	if keys, err := LoadJWKS(ctx, path, nil); err != nil || len(keys) != 1 {
		t.Errorf("LoadJWKS(file) = %v, %v; want the one key", keys, err)
	}
	for source, want := range map[string]string{
		srv.URL + "/broken":              "503 Service Unavailable",
		srv.URL + "/huge":                "exceeds 1048576 bytes",
		filepath.Join(t.TempDir(), "no"): "no such file",
		// Keys over plain http could be anyone's, except on loopback.
		"http://keys.example.com" + JWKSPath: "uses http, which anyone on the way could answer with their own keys",
	} {
		if _, err := LoadJWKS(ctx, source, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("LoadJWKS(%s) = %v, want an error saying %q", source, err, want)
		}
	}
}
