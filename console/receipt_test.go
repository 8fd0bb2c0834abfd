package console_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/secrets"
	"github.com/taskgate/taskgate/signingkeys"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/taskwire"
)

// TestOperationPageShowsTheIssuedReceipt: the operation page shows the
// receipt marked provisional while the operation runs, and the version the
// gateway issued once it is final, naming the key that signed it.
func TestOperationPageShowsTheIssuedReceipt(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "taskgate.keys")
	if _, err := secrets.CreateFile(keys); err != nil {
		t.Fatal(err)
	}
	h, err := fixtures.New(testCtx(t), &fixtures.Options{Config: fixtures.ConfigOptions{SecretsKeyFile: keys}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	ring, err := secrets.LoadFile(keys)
	if err != nil {
		t.Fatal(err)
	}
	k, err := signingkeys.Create(testCtx(t), h.Store, ring, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	key, _ := approverKey(t, h, "acme")
	b := newBrowser(t, h)
	b.signIn(key)

	cs, err := h.Connect(testCtx(t), "acme", fixtures.EraExtension)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	task, _, err := taskwire.CallToolAsTask(testCtx(t), cs, fixtures.RunSuiteCall("op-issued", nil), nil)
	if err != nil || task == nil {
		t.Fatalf("tools/call = %+v, %v; want a task", task, err)
	}
	if p := b.get("/console/operations/op-issued"); !strings.Contains(p.body, "### Provisional") {
		op, _ := h.Store.OperationGet(testCtx(t), &ledger.OperationGetParams{Tenant: "acme", OperationID: "op-issued"})
		if op == nil || !op.State.Terminal() {
			t.Errorf("the page of a running operation does not mark its receipt provisional:\n%s", p.body)
		}
	}
	testwait.Until(t, testCtx(t), "the operation page to show the issued receipt", func() (bool, error) {
		p := b.get("/console/operations/op-issued")
		return strings.Contains(p.body, "### Issued") && strings.Contains(p.body, k.KeyID) && !strings.Contains(p.body, "### Provisional"), nil
	})
}
