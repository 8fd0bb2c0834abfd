package cli_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"

	"github.com/taskgate/taskgate/cmd/taskgate/cli"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/secrets"
	"github.com/taskgate/taskgate/signingkeys"
)

// runEnv runs taskgate with args against l's ledger and env as its
// environment.
func (l *ledgerFile) runEnv(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := cli.Main(ctx, append([]string{"--db", l.db}, args...), &stdout, &stderr, func(k string) string { return env[k] })
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// signingConfig writes a key file and a configuration naming it and l's
// ledger.
func signingConfig(t *testing.T, l *ledgerFile) (cfg, keyFile string) {
	t.Helper()
	dir := t.TempDir()
	keyFile = filepath.Join(dir, "taskgate.keys")
	if _, err := secrets.CreateFile(keyFile); err != nil {
		t.Fatal(err)
	}
	cfg = filepath.Join(dir, "taskgate.yaml")
	y := "database: " + l.db + "\nlisten: 127.0.0.1:0\nsecrets:\n  key_file: " + keyFile + "\nupstreams: []\n"
	if err := os.WriteFile(cfg, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg, keyFile
}

func writeFile(t *testing.T, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// editReceipt changes a receipt's JSON rendering with fn and writes it.
func editReceipt(t *testing.T, doc string, fn func(r map[string]any)) string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber()
	var d map[string]map[string]any
	if err := dec.Decode(&d); err != nil {
		t.Fatal(err)
	}
	fn(d["paid_tool_retry_receipt"])
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, "edited.json", b)
}

// checkUnverified checks that verify exited 1 saying each of want.
func checkUnverified(t *testing.T, r result, want ...string) {
	t.Helper()
	if r.code != 1 || !strings.HasPrefix(r.stderr, "Error: ") || r.stdout != "" {
		t.Errorf("verify: exit %d, stdout %q, stderr %q; want exit 1 and an Error: on stderr only", r.code, r.stdout, r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("verify stderr %q, want it to say %q", r.stderr, w)
		}
	}
}

func TestSigningKeysAndVerify(t *testing.T) {
	l := newLedger(t)
	l.completed(t, "acme", "settlement-regression-842")

	// Before the receipt is issued, it is provisional, and says so.
	r := l.run(t, "receipt", "settlement-regression-842", "--format", "json")
	if r.code != 0 || !strings.Contains(r.stdout, `"provisional": true`) || !strings.Contains(r.stderr, "The receipt is provisional") {
		t.Fatalf("receipt before issue: exit %d, stdout %s, stderr %q; want it provisional, saying so", r.code, r.stdout, r.stderr)
	}
	provisional := writeFile(t, "provisional.json", []byte(r.stdout))
	checkFailure(t, l.run(t, "receipt", "settlement-regression-842", "--format", "dsse"), "not issued yet", false)
	checkFailure(t, l.run(t, "receipt", "issue", "settlement-regression-842"), "the ledger has no active signing key", true)
	checkFailure(t, l.run(t, "signing-keys", "create"), "no secrets key is configured to encrypt and decrypt receipt-signing keys", true)
	if r := l.run(t, "signing-keys", "list"); r.code != 0 || !strings.Contains(r.stderr, "No receipt-signing keys") {
		t.Errorf("list without keys: exit %d, stderr %q", r.code, r.stderr)
	}

	cfg, keyFile := signingConfig(t, l)
	ring, err := secrets.LoadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	kid := strings.TrimSpace(l.ok(t, "signing-keys", "create", "--config", cfg))
	if len(kid) != 43 {
		t.Fatalf("create printed %q, want the key ID", kid)
	}
	list := l.ok(t, "signing-keys", "list")
	if !strings.Contains(list, kid) || !strings.Contains(list, "active") || !strings.Contains(list, ring.Newest()) {
		t.Errorf("list =\n%s\nwant %s active, sealed with %s", list, kid, ring.Newest())
	}

	// Issuing signs, so it needs the secrets keys; reading never does.
	checkFailure(t, l.run(t, "receipt", "issue", "settlement-regression-842"), "encrypted with secrets key "+ring.Newest(), true)
	if out := l.ok(t, "receipt", "issue", "settlement-regression-842", "--config", cfg); !strings.Contains(out, "issued version 1") || !strings.Contains(out, kid) {
		t.Errorf("issue printed %q, want version 1 signed by %s", out, kid)
	}
	if out := l.ok(t, "receipt", "issue", "settlement-regression-842", "--config", cfg); !strings.Contains(out, "nothing issued") {
		t.Errorf("issuing again printed %q, want nothing issued", out)
	}
	doc := l.ok(t, "receipt", "settlement-regression-842", "--format", "dsse")
	if again := l.ok(t, "receipt", "settlement-regression-842", "--format", "dsse"); again != doc {
		t.Errorf("two reads of the issued receipt differ:\n%s\n%s", doc, again)
	}
	if md := l.ok(t, "receipt", "settlement-regression-842", "--format", "md"); !strings.Contains(md, "### Issued") || !strings.Contains(md, kid) {
		t.Errorf("the Markdown of the issued receipt:\n%s\nwant its issue, signed by %s", md, kid)
	}
	issued := writeFile(t, "receipt.dsse.json", []byte(doc))

	// verify against the ledger's keys, a JWK Set file and a URL.
	out := l.ok(t, "receipt", "verify", issued)
	for _, want := range []string{issued + ": verified against the signing keys of ledger", "operation:  settlement-regression-842",
		"issued:     version 1", "by key " + kid} {
		if !strings.Contains(out, want) {
			t.Errorf("verify =\n%s\nwant %q", out, want)
		}
	}
	jwks := writeFile(t, "keys.json", []byte(l.ok(t, "signing-keys", "list", "--jwks")))
	l.ok(t, "receipt", "verify", issued, "--jwks", jwks)
	checkPEMVerifies(t, l.ok(t, "signing-keys", "list", "--pem", "--kid", kid), doc)
	checkFailure(t, l.run(t, "signing-keys", "list", "--pem", "--kid", "no-such-kid"), `there is no receipt-signing key "no-such-kid"`, true)
	srv := httptest.NewServer(signingkeys.Handler(l.store, nil))
	t.Cleanup(srv.Close)
	l.ok(t, "receipt", "verify", issued, "--jwks", srv.URL+signingkeys.JWKSPath)

	// Change a figure, a lineage row or the subject: verify fails naming it.
	checkUnverified(t, l.run(t, "receipt", "verify", editIssued(t, doc, func(st, r map[string]any) { r["final_cost_usd"] = "1.00" }), "--jwks", jwks),
		"the signature does not match the receipt's statement", "final_cost_usd differs from what was signed")
	checkUnverified(t, l.run(t, "receipt", "verify", editIssued(t, doc, func(st, r map[string]any) {
		r["lineage"].([]any)[0].(map[string]any)["decision"] = "attached"
	})), "lineage[0].decision differs from what was signed")
	checkUnverified(t, l.run(t, "receipt", "verify", editIssued(t, doc, func(st, r map[string]any) {
		st["subject"].([]any)[0].(map[string]any)["digest"] = map[string]any{"sha256": strings.Repeat("0", 64)}
	})), "subject[0].digest.sha256 differs from what was signed")
	checkUnverified(t, l.run(t, "receipt", "verify", provisional), "the receipt is not signed")
	yml := writeFile(t, "receipt.yaml", []byte(l.ok(t, "receipt", "settlement-regression-842")))
	checkFailure(t, l.run(t, "receipt", "verify", yml), "not a receipt's JSON rendering", false)

	// A receipt's JSON rendering signed with a detached JWS, as receipts
	// were before they were issued, still verifies, and fails edited.
	op, err := l.store.OperationGet(context.Background(), &ledger.OperationGetParams{Tenant: "acme", OperationID: "settlement-regression-842"})
	if err != nil {
		t.Fatal(err)
	}
	in, err := receipt.Load(context.Background(), l.store, op, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc := receipt.Build(in)
	if signed, err := signingkeys.NewSigner(l.store, ring).Sign(context.Background(), rc, in.Now); err != nil || !signed {
		t.Fatalf("sign with a JWS: %v, %v", signed, err)
	}
	jwsDoc, err := rc.JSON()
	if err != nil {
		t.Fatal(err)
	}
	jwsFile := writeFile(t, "receipt.json", jwsDoc)
	if out := l.ok(t, "receipt", "verify", jwsFile, "--jwks", jwks); !strings.Contains(out, "(EdDSA)") {
		t.Errorf("verify of the JWS form =\n%s\nwant it signed by %s (EdDSA)", out, kid)
	}
	checkUnverified(t, l.run(t, "receipt", "verify", editReceipt(t, string(jwsDoc), func(r map[string]any) { r["final_cost_usd"] = "1.00" }), "--jwks", jwks),
		"the signature does not match the receipt's content", "final_cost_usd differs from what was signed")

	// A receipt signed by a key since retired still verifies; one signed
	// by another ledger's key does not.
	retired := l.ok(t, "signing-keys", "retire", kid)
	if !strings.Contains(retired, "retired at") {
		t.Errorf("retire printed %q", retired)
	}
	if out := l.ok(t, "receipt", "verify", issued); !strings.Contains(out, kid+", retired ") {
		t.Errorf("verify after retiring =\n%s\nwant the key shown retired", out)
	}
	jwksAfter := writeFile(t, "keys.json", []byte(l.ok(t, "signing-keys", "list", "--jwks")))
	l.ok(t, "receipt", "verify", issued, "--jwks", jwksAfter)
	if again := l.ok(t, "receipt", "settlement-regression-842", "--format", "dsse"); again != doc {
		t.Errorf("the issued receipt changed when its key was retired")
	}

	other := newLedger(t)
	other.completed(t, "acme", "settlement-regression-842")
	otherCfg, _ := signingConfig(t, other)
	otherKid := strings.TrimSpace(other.ok(t, "signing-keys", "create", "--config", otherCfg))
	other.ok(t, "receipt", "issue", "settlement-regression-842", "--config", otherCfg)
	foreign := writeFile(t, "foreign.json", []byte(other.ok(t, "receipt", "settlement-regression-842", "--format", "dsse")))
	checkUnverified(t, l.run(t, "receipt", "verify", foreign, "--jwks", jwksAfter), "signed by key "+otherKid+", which is not among the trusted keys")

	checkFailure(t, l.run(t, "signing-keys", "retire", "no-such-kid"), `there is no receipt-signing key "no-such-kid"`, true)
	checkFailure(t, l.run(t, "receipt", "verify", issued, "--jwks", jwks, "--config", cfg), "give one", true)
	checkFailure(t, l.run(t, "signing-keys", "list", "--json", "--jwks"), "give one", true)
}

// editIssued changes the statement of an issued receipt's envelope with fn
// (given the statement and the receipt in its predicate), keeping the
// signature, and writes it.
func editIssued(t *testing.T, doc string, fn func(st, r map[string]any)) string {
	t.Helper()
	var env map[string]any
	if err := json.Unmarshal([]byte(doc), &env); err != nil {
		t.Fatal(err)
	}
	payload, err := base64.StdEncoding.DecodeString(env["payload"].(string))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var st map[string]any
	if err := dec.Decode(&st); err != nil {
		t.Fatal(err)
	}
	fn(st, st["predicate"].(map[string]any)["paid_tool_retry_receipt"].(map[string]any))
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	env["payload"] = base64.StdEncoding.EncodeToString(b)
	out, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, "edited.dsse.json", out)
}

// A second key signs from its creation; create names the older active
// key, and list --json shows which one signs.
func TestSigningKeysNewestSigns(t *testing.T) {
	l := newLedger(t)
	cfg, _ := signingConfig(t, l)
	first := strings.TrimSpace(l.ok(t, "signing-keys", "create", "--config", cfg))
	r := l.run(t, "signing-keys", "create", "--config", cfg)
	second := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.Contains(r.stderr, "Key "+first+" is still active but signs nothing") {
		t.Fatalf("second create: exit %d, stderr %q; want the first key named as still active", r.code, r.stderr)
	}
	var views []struct {
		Kid    string `json:"kid"`
		Status string `json:"status"`
		Signs  bool   `json:"signs"`
	}
	if err := json.Unmarshal([]byte(l.ok(t, "signing-keys", "list", "--json")), &views); err != nil {
		t.Fatal(err)
	}
	if len(views) != 2 || views[0].Kid != first || views[0].Signs || views[1].Kid != second || !views[1].Signs {
		t.Errorf("list --json = %+v; want %s then %s, the second signing", views, first, second)
	}
	// A kid is base64url and may begin with "-"; after "--" it is no flag.
	if r := l.run(t, "signing-keys", "retire", "--", second); r.code != 0 || !strings.Contains(r.stderr, "signed with key "+first+" from now on") {
		t.Errorf("retiring the newer key: exit %d, stderr %q; want the older one named as signing", r.code, r.stderr)
	}
}

// checkPEMVerifies checks that the one PEM public key in pemText, read as
// any PEM reader reads it, verifies the DSSE envelope doc's signature over
// the pre-authentication encoding.
func checkPEMVerifies(t *testing.T, pemText, doc string) {
	t.Helper()
	block, rest := pem.Decode([]byte(pemText))
	if block == nil || block.Type != "PUBLIC KEY" || strings.Contains(string(rest), "BEGIN") {
		t.Fatalf("signing-keys list --pem --kid printed %q, want one PEM public key", pemText)
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	var env dsse.Envelope
	if err := json.Unmarshal([]byte(doc), &env); err != nil {
		t.Fatal(err)
	}
	payload, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := base64.StdEncoding.DecodeString(env.Signatures[0].Sig)
	if err != nil {
		t.Fatal(err)
	}
	pae := dsse.PAE(env.PayloadType, payload)
	var ok bool
	switch k := pub.(type) {
	case ed25519.PublicKey:
		ok = ed25519.Verify(k, pae, sig)
	case *ecdsa.PublicKey:
		sum := sha256.Sum256(pae)
		ok = ecdsa.VerifyASN1(k, sum[:], sig)
	}
	if !ok {
		t.Errorf("the PEM key (%T) does not verify the issued receipt", pub)
	}
}

// An ECDSA P-256 key signs the issued receipt; its Sigstore bundle
// verifies against the ledger's keys and a JWK Set, and fails edited.
func TestSigningKeysECDSAAndBundle(t *testing.T) {
	l := newLedger(t)
	l.completed(t, "acme", "settlement-regression-842")
	cfg, _ := signingConfig(t, l)
	checkFailure(t, l.run(t, "signing-keys", "create", "--algorithm", "rsa", "--config", cfg), `"rsa" is not a receipt-signing algorithm; use ed25519 or ecdsa-p256`, true)
	kid := strings.TrimSpace(l.ok(t, "signing-keys", "create", "--algorithm", "ecdsa-p256", "--config", cfg))
	if list := l.ok(t, "signing-keys", "list"); !strings.Contains(list, kid) || !strings.Contains(list, "ES256") {
		t.Errorf("list =\n%s\nwant %s, ES256", list, kid)
	}
	checkFailure(t, l.run(t, "receipt", "settlement-regression-842", "--format", "sigstore-bundle"), "not issued yet", false)
	l.ok(t, "receipt", "issue", "settlement-regression-842", "--config", cfg)
	doc := l.ok(t, "receipt", "settlement-regression-842", "--format", "dsse")
	checkPEMVerifies(t, l.ok(t, "signing-keys", "list", "--pem", "--kid", kid), doc)

	b := l.ok(t, "receipt", "settlement-regression-842", "--format", "sigstore-bundle")
	if again := l.ok(t, "receipt", "settlement-regression-842", "--format", "sigstore-bundle"); again != b {
		t.Errorf("two reads of the bundle differ:\n%s\n%s", b, again)
	}
	bundle := writeFile(t, "receipt.sigstore.json", []byte(b))
	jwks := writeFile(t, "keys.json", []byte(l.ok(t, "signing-keys", "list", "--jwks")))
	for _, args := range [][]string{{"receipt", "verify", bundle}, {"receipt", "verify", bundle, "--jwks", jwks}} {
		out := l.ok(t, args...)
		for _, want := range []string{"in a DSSE envelope in a Sigstore bundle", "by key " + kid + " (ES256)"} {
			if !strings.Contains(out, want) {
				t.Errorf("%v =\n%s\nwant %q", args, out, want)
			}
		}
	}
	var bm map[string]any
	if err := json.Unmarshal([]byte(b), &bm); err != nil {
		t.Fatal(err)
	}
	env, err := json.Marshal(bm["dsseEnvelope"])
	if err != nil {
		t.Fatal(err)
	}
	edited, err := os.ReadFile(editIssued(t, string(env), func(_, r map[string]any) { r["final_cost_usd"] = "1.00" }))
	if err != nil {
		t.Fatal(err)
	}
	bm["dsseEnvelope"] = json.RawMessage(edited)
	eb, err := json.Marshal(bm)
	if err != nil {
		t.Fatal(err)
	}
	checkUnverified(t, l.run(t, "receipt", "verify", writeFile(t, "edited.sigstore.json", eb), "--jwks", jwks),
		"the signature does not match the receipt's statement", "final_cost_usd differs from what was signed")
}
