package worker_test

import (
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/secrets"
	"github.com/taskgate/taskgate/signingkeys"
	"github.com/taskgate/taskgate/sim/fixtures"
)

// TestReconciliationIssuesTheReceipt: once reconciliation finds an
// operation complete, the worker issues its receipt as version 1, signed
// with the ledger's active key, over the provider's charge.
func TestReconciliationIssuesTheReceipt(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	keys := keyFile(t)
	h := newHarness(t, &fixtures.Options{Config: fixtures.ConfigOptions{SecretsKeyFile: keys}})
	ring, err := secrets.LoadFile(keys)
	if err != nil {
		t.Fatal(err)
	}
	key, err := signingkeys.Create(ctx, h.Store, ring, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, ctx, h, fixtures.EraExtension)
	startTask(t, ctx, cs, "op-issued")
	op := awaitOperation(t, ctx, h.Store, "op-issued", ended)

	var versions []*ledger.ReceiptVersion
	testwait.Until(t, ctx, "the receipt of op-issued to be issued", func() (bool, error) {
		versions, err = h.Store.ReceiptVersions(ctx, op.ID)
		return err == nil && len(versions) > 0, err
	})
	if len(versions) != 1 || versions[0].Version != 1 || versions[0].KeyID != key.KeyID {
		t.Fatalf("issued %+v, want version 1 signed by %s", versions, key.KeyID)
	}
	list, err := h.Store.SigningKeyList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v, err := receipt.VerifyEnvelope(ctx, versions[0].Document, signingkeys.PublicKeys(list))
	if err != nil || !v.OK() || v.OperationID != "op-issued" {
		t.Fatalf("verify the issued receipt: %+v, %v", v, err)
	}
	r, err := receipt.Issued(versions[0].Document, key.KeyID)
	if err != nil {
		t.Fatal(err)
	}
	if r.ReconciliationStatus != receipt.ReconciliationComplete || r.FinalCostUSD.IsZero() {
		t.Errorf("the issued receipt says reconciliation %s, final %s; want complete with the provider's charge", r.ReconciliationStatus, r.FinalCostUSD)
	}
}
