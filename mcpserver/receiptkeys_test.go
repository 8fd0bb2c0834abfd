package mcpserver_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/secrets"
	"github.com/taskgate/taskgate/signingkeys"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/taskwire"
)

// TestReceiptKeysJWKS: the gateway serves its receipt-signing keys,
// unauthenticated, at the well-known path, and the receipts its REST API
// issues verify against that set, also once the key is retired.
func TestReceiptKeysJWKS(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "taskgate.keys")
	if err := os.WriteFile(keyFile, []byte(secrets.NewKey()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ring, err := secrets.LoadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	h := harness(t, &fixtures.Options{Dir: dir, Config: fixtures.ConfigOptions{SecretsKeyFile: keyFile}})
	ctx := testCtx(t)
	k, err := signingkeys.Create(ctx, h.Store, ring, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, h, "acme", fixtures.EraExtension)
	if _, _, err := taskwire.CallToolAsTask(ctx, cs, fixtures.RunSuiteCall("op-signed", nil), nil); err != nil {
		t.Fatal(err)
	}
	base := strings.TrimSuffix(h.MCPURL(), "/mcp")
	apiKey, err := h.Key(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	// The receipt is issued once its operation is reconciled; until then
	// the DSSE form is refused as provisional.
	var doc []byte
	testwait.Until(t, ctx, "the receipt to be issued", func() (bool, error) {
		code, b := getWithKey(t, ctx, base+"/v1/operations/op-signed/receipt?format=dsse", apiKey)
		doc = b
		return code == http.StatusOK, fmt.Errorf("%d %s", code, b)
	})
	if _, err := signingkeys.Retire(ctx, h.Store, k.KeyID, time.Time{}); err != nil {
		t.Fatal(err)
	}
	jwks := getBody(t, ctx, base+signingkeys.JWKSPath, "")
	keys, err := signingkeys.ParseJWKS(jwks, signingkeys.JWKSPath)
	if err != nil {
		t.Fatal(err)
	}
	v, err := receipt.VerifyEnvelope(ctx, doc, keys)
	if err != nil || !v.OK() || v.KeyID != k.KeyID || v.OperationID != "op-signed" {
		t.Fatalf("the gateway's receipt against its JWKS: %+v, %v; want it verified, signed by the retired key %s", v, err, k.KeyID)
	}
}

// getBody GETs url, with key as bearer token unless empty, and fails the
// test unless the answer is 200.
func getBody(t *testing.T, ctx context.Context, url, key string) []byte {
	t.Helper()
	code, b := getWithKey(t, ctx, url, key)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, code, b)
	}
	return b
}

// getWithKey GETs url, with key as bearer token unless empty, and returns the
// answer's status code and body.
func getWithKey(t *testing.T, ctx context.Context, url, key string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, b
}
