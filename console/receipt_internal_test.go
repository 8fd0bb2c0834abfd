package console

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/receipt"
)

// goldenReceipt reads one of the receipt package's golden receipts.
func goldenReceipt(t *testing.T, name string) *receipt.Receipt {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "receipt", "testdata", name+".json.golden"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Receipt *receipt.Receipt `json:"paid_tool_retry_receipt"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Receipt
}

// renderReceipt renders the receipt page of d and parses it as a browser
// would.
func renderReceipt(t *testing.T, d receiptData) (string, *html.Node) {
	t.Helper()
	tmpl, err := parseTemplates()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := tmpl.pages["receipt"].ExecuteTemplate(&b, "layout", &page{Title: "Receipt", Tenant: "acme", Data: d}); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	return b.String(), doc
}

// walk calls f on n and every node under it.
func walk(n *html.Node, f func(*html.Node)) {
	f(n)
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walk(c, f)
	}
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func hasAttr(n *html.Node, key string) bool {
	for _, a := range n.Attr {
		if a.Key == key {
			return true
		}
	}
	return false
}

// byID is the element with this id; nil when none.
func byID(doc *html.Node, id string) *html.Node {
	var found *html.Node
	walk(doc, func(n *html.Node) {
		if found == nil && n.Type == html.ElementNode && attr(n, "id") == id {
			found = n
		}
	})
	return found
}

// text is the text a browser shows for n.
func text(n *html.Node) string {
	var b strings.Builder
	walk(n, func(c *html.Node) {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	})
	return b.String()
}

// TestReceiptPageRendersEveryGolden: every golden receipt renders, its
// figures read as the receipt says, and a provisional one says so and
// offers nothing to download.
func TestReceiptPageRendersEveryGolden(t *testing.T) {
	for _, name := range []string{"clean", "duplicate", "missing_invoice", "indeterminate", "cost_breach", "cancel_after_effect", "approved_on_request", "cancel_kept"} {
		t.Run(name, func(t *testing.T) {
			r := goldenReceipt(t, name)
			r.Provisional = true
			_, doc := renderReceipt(t, receiptData{Receipt: r})
			if got, want := text(byID(doc, "final-cost")), r.FinalCostUSD.Display(); got != want {
				t.Errorf("final cost shows %q, want %q", got, want)
			}
			if byID(doc, "provisional") == nil || byID(doc, "issued") != nil || byID(doc, "download") != nil {
				t.Errorf("a provisional receipt is not marked so, or offers a download")
			}
			if n := byID(doc, "lineage"); len(r.Lineage) > 0 && (n == nil || !strings.Contains(text(n), r.Lineage[0].RequestID)) {
				t.Errorf("the lineage table does not show request %s", r.Lineage[0].RequestID)
			}
			if n := byID(doc, "charges"); len(r.Charges) > 0 && (n == nil || !strings.Contains(text(n), r.Charges[0].ChargeID)) {
				t.Errorf("the charges table does not show charge %s", r.Charges[0].ChargeID)
			}
			if a := r.Approval; a != nil && a.ApprovedBy != "" && !strings.Contains(text(byID(doc, "approved-by")), a.ApprovedBy) {
				t.Errorf("the page does not name approver %s", a.ApprovedBy)
			}
			if len(r.NextActions) > 0 && !strings.Contains(text(byID(doc, "next-actions")), r.NextActions[0].Reason) {
				t.Errorf("the next actions do not say %q", r.NextActions[0].Reason)
			}
		})
	}
}

// TestReceiptPageShowsHostileTextInert: every string an agent or a
// provider chose reaches the page as text: no element, attribute, link or
// script of its own, bidi and zero-width characters as visible marks, and
// the provider's evidence folded in its own <details>.
func TestReceiptPageShowsHostileTextInert(t *testing.T) {
	const (
		script  = `<script>alert(1)</script>`
		breakIn = `"></code></pre></details><img src=x onerror=alert(1)><a href="javascript:alert(2)">x</a>`
		bidi    = "bidi-\u202etxt.exe\u200b"
	)
	r := goldenReceipt(t, "approved_on_request")
	r.OperationID = bidi + script
	r.Tool = "hosted_test.run_suite" + breakIn
	r.Lineage[0].RequestID = breakIn
	r.Lineage[0].Reason = script
	r.ApprovalRequest.Note = breakIn + bidi
	r.Approval.ApprovedBy = script
	r.RemoteJobs[0].RemoteJobID = "job" + breakIn
	r.RemoteJobs[0].Endpoint = "javascript:alert(3)"
	r.RemoteJobs[0].Evidence = []receipt.Evidence{{Record: "status", Tool: "lookup" + script, SeenAt: time.Date(2026, 5, 4, 10, 5, 0, 0, time.UTC),
		Answer: `{"status":"` + strings.ReplaceAll(breakIn, `"`, `\"`) + `","note":"` + strings.Repeat("long ", 200) + `","amount":17.840000000000000001}`}}
	r.Charges[0].ChargeID = script
	r.NextActions = []receipt.NextAction{{Action: "request_refund", Target: breakIn, Reason: script, Owner: bidi}}
	r.Issue = &receipt.IssueLine{Version: 2, Digest: strings.Repeat("ab", 32), Previous: strings.Repeat("cd", 32), KeyID: breakIn, IssuedAt: time.Date(2026, 5, 4, 10, 6, 0, 0, time.UTC)}
	v := &ledger.ReceiptVersion{Version: 2, Digest: strings.Repeat("ab", 32), Previous: strings.Repeat("cd", 32), KeyID: breakIn, IssuedAt: r.Issue.IssuedAt}
	v1 := &ledger.ReceiptVersion{Version: 1, Digest: strings.Repeat("cd", 32), KeyID: breakIn, IssuedAt: r.Issue.IssuedAt.Add(-time.Hour)}
	body, doc := renderReceipt(t, receiptData{Receipt: r, Shown: v, Latest: 2, Algorithm: "EdDSA", Versions: []*ledger.ReceiptVersion{v, v1},
		Check: &receipt.Verification{KeyID: breakIn}})

	details := 0
	walk(doc, func(n *html.Node) {
		if n.Type != html.ElementNode {
			return
		}
		switch n.Data {
		case "script", "img", "iframe", "object", "embed", "style", "base":
			t.Errorf("the page has a <%s> element", n.Data)
		case "details":
			details++
		}
		for _, a := range n.Attr {
			if strings.HasPrefix(a.Key, "on") {
				t.Errorf("<%s> has an event handler %s=%q", n.Data, a.Key, a.Val)
			}
			if (a.Key == "href" || a.Key == "action") && !strings.HasPrefix(a.Val, "/console/") {
				t.Errorf("<%s %s=%q> leads out of the console", n.Data, a.Key, a.Val)
			}
		}
	})
	if details != 1 {
		t.Errorf("the page has %d <details> elements, want the one of the job's evidence", details)
	}
	if strings.ContainsAny(body, "\u202e\u200b") {
		t.Errorf("the page shows a bidi or zero-width character as it is")
	}
	shown := text(doc)
	for _, want := range []string{`bidi-\u{202E}txt.exe\u{200B}` + script, breakIn, "lookup" + script, "javascript:alert(3)", "17.840000000000000001"} {
		if !strings.Contains(shown, want) {
			t.Errorf("the page does not show %q as text", want)
		}
	}
	var evidence *html.Node
	walk(doc, func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "details" {
			evidence = n
		}
	})
	if evidence == nil || hasAttr(evidence, "open") || !strings.Contains(text(evidence), `"status": "\"></code>`) {
		t.Errorf("the provider's evidence is not folded, indented JSON in its <details>:\n%s", body)
	}
}
