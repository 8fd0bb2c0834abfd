package console_test

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/internal/testwait"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/receipt/issue"
	"github.com/taskgate/taskgate/secrets"
	"github.com/taskgate/taskgate/signingkeys"
	"github.com/taskgate/taskgate/sim/fixtures"
	"github.com/taskgate/taskgate/taskwire"
)

// TestOperationPageShowsTheIssuedReceipt: the operation page marks the
// receipt provisional while the operation runs and links to the version
// the gateway issued once it is final; the receipt's own page renders that
// version with the key and algorithm that signed it, a later version
// supersedes it there, and the DSSE envelope of each version downloads
// byte for byte as stored, for the signed-in tenant only.
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
	if p := b.get("/console/operations/op-issued/receipt"); !strings.Contains(p.body, `id="provisional"`) || strings.Contains(p.body, `id="download"`) {
		if v, _ := receiptVersions(t, h, "op-issued"); len(v) == 0 {
			t.Errorf("the receipt page of a running operation does not mark it provisional, or offers a download:\n%s", p.body)
		}
	}
	if p := b.get("/console/operations/op-issued/receipt.dsse"); p.status != http.StatusConflict && p.header.Get("Content-Type") != "application/vnd.dsse.envelope.v1+json" {
		t.Errorf("the envelope of a provisional receipt = %d %s, want 409 or, once issued, the envelope", p.status, p.header.Get("Content-Type"))
	}
	testwait.Until(t, testCtx(t), "the operation page to link to the issued receipt", func() (bool, error) {
		p := b.get("/console/operations/op-issued")
		return strings.Contains(p.body, `class="issued" id="receipt"`) && strings.Contains(p.body, k.KeyID), nil
	})

	p := b.get("/console/operations/op-issued/receipt")
	if strings.Contains(p.body, `http-equiv="refresh"`) {
		t.Errorf("the page of an issued receipt reloads itself")
	}
	for _, want := range []string{`<b>Issued</b> version 1`, k.KeyID, "<dd>EdDSA,", "the signature matches", `id="lineage"`, `id="charges"`,
		`href="/console/operations/op-issued/receipt.dsse?version=1"`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the receipt page lacks %s:\n%s", want, p.body)
		}
	}
	versions, op := receiptVersions(t, h, "op-issued")
	first := versions[0]
	dl := b.get("/console/operations/op-issued/receipt.dsse")
	if dl.status != http.StatusOK || dl.body != string(first.Document) || dl.header.Get("Content-Type") != "application/vnd.dsse.envelope.v1+json" ||
		!strings.HasPrefix(dl.header.Get("Content-Disposition"), "attachment;") {
		t.Fatalf("download = %d %v, %d bytes; want version 1's envelope as stored, %d bytes, as an attachment", dl.status, dl.header, len(dl.body), len(first.Document))
	}

	// A late charge: the next version supersedes the first on the page.
	in, err := receipt.Load(testCtx(t), h.Store, op, nil)
	if err != nil || len(in.RemoteJobs) == 0 {
		t.Fatalf("load the receipt: %v, %d remote jobs", err, len(in.RemoteJobs))
	}
	op, err = h.Store.Transition(testCtx(t), &ledger.TransitionParams{OperationRef: op.ID,
		Charges: []*ledger.ChargeUpsert{{RemoteJobID: in.RemoteJobs[0].RemoteJobID, ProviderChargeID: "ch-late", Amount: money.MustParse("0.50", "USD"), Status: ledger.ChargeFinal}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := issue.New(h.Store, ring).Issue(testCtx(t), op, nil); err != nil {
		t.Fatal(err)
	}
	versions, _ = receiptVersions(t, h, "op-issued")
	if len(versions) != 2 {
		t.Fatalf("%d versions after a late charge, want 2", len(versions))
	}
	p = b.get("/console/operations/op-issued/receipt")
	for _, want := range []string{`<b>Issued</b> version 2`, first.Digest, `href="/console/operations/op-issued/receipt?version=1">version 1</a>`, "ch-late"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the receipt page of version 2 lacks %s:\n%s", want, p.body)
		}
	}
	if old := b.get("/console/operations/op-issued/receipt?version=1"); !strings.Contains(old.body, "<b>superseded</b>") || strings.Contains(old.body, "ch-late") {
		t.Errorf("version 1's page is not marked superseded, or shows the later charge:\n%s", old.body)
	}
	if dl := b.get("/console/operations/op-issued/receipt.dsse?version=1"); dl.body != string(first.Document) {
		t.Errorf("version 1's download is not its envelope as stored")
	}
	for _, path := range []string{"/console/operations/op-issued/receipt?version=3", "/console/operations/op-issued/receipt.dsse?version=3"} {
		if p := b.get(path); p.status != http.StatusNotFound || !strings.Contains(p.body, "versions run from 1 to 2") {
			t.Errorf("GET %s = %d, want 404 naming the versions there are:\n%s", path, p.status, p.body)
		}
	}
	if p := b.get("/console/operations/op-issued/receipt?version=x"); p.status != http.StatusBadRequest {
		t.Errorf("version=x = %d, want 400", p.status)
	}

	other, _ := approverKey(t, h, "globex")
	o := newBrowser(t, h)
	o.signIn(other)
	for _, path := range []string{"/console/operations/op-issued/receipt", "/console/operations/op-issued/receipt.dsse"} {
		if p := o.get(path); p.status != http.StatusNotFound || strings.Contains(p.body, first.Digest) {
			t.Errorf("another tenant's GET %s = %d, want 404 with nothing of the receipt", path, p.status)
		}
	}
	if p := newBrowser(t, h).get("/console/operations/op-issued/receipt.dsse"); p.url != "/console/sign-in" || strings.Contains(p.body, "payloadType") {
		t.Errorf("without a session the envelope download = %d at %s, want the sign-in page", p.status, p.url)
	}
}

// receiptVersions are the issued versions of tenant acme's operation opID.
func receiptVersions(t *testing.T, h *fixtures.Harness, opID string) ([]*ledger.ReceiptVersion, *ledger.Operation) {
	t.Helper()
	op, err := h.Store.OperationGet(testCtx(t), &ledger.OperationGetParams{Tenant: "acme", OperationID: opID})
	if err != nil {
		t.Fatal(err)
	}
	v, err := h.Store.ReceiptVersions(testCtx(t), op.ID)
	if err != nil {
		t.Fatal(err)
	}
	return v, op
}
