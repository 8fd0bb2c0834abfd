package packet

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html"
	"strconv"
	"strings"
	"time"

	"github.com/taskgate/taskgate/internal/inert"
)

//go:embed packet.schema.json
var schema string

// Schema returns the JSON Schema (draft 2020-12) of the JSON rendering.
func Schema() []byte { return []byte(schema) }

// DocumentKey is the top-level key of the JSON rendering.
const DocumentKey = "review_packet"

// document wraps a packet under DocumentKey.
type document struct {
	Packet *Packet `json:"review_packet"`
}

// JSON renders the packet as indented JSON under review_packet, money as
// decimal strings and times in RFC 3339 UTC; it validates against
// [Schema].
func (p *Packet) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(document{p}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("render the review packet as JSON: %w", err)
	}
	return append(b, '\n'), nil
}

// Render renders p in format "json" or "md" (also "markdown").
func Render(p *Packet, format string) ([]byte, error) {
	switch strings.ToLower(format) {
	case "json":
		return p.JSON()
	case "md", "markdown":
		return p.Markdown(), nil
	default:
		return nil, fmt.Errorf("unknown review packet format %q; use md or json", format)
	}
}

// Markdown renders a packet that [Build] made as GitHub-flavoured Markdown
// for a pull-request comment: the verdict first, then the summary, the
// operations that are not ready, every operation in a table, the
// approvals and who gave them, how the receipts can be verified, and each
// receipt, folded, with its embedded form. Text from the ledger and the
// provider is shown as code spans (IDs) or escaped text ([inert]), and in
// the folds' HTML summaries escaped as HTML, so that it can neither break
// the document's structure nor add a link, an image or markup to it.
func (p *Packet) Markdown() []byte {
	var b bytes.Buffer
	s := p.Summary
	switch {
	case p.Ready() && s.Operations == 0:
		b.WriteString("## Review packet: ready\n\n**Ready.** No operations were selected, so nothing waits for review.\n\n")
	case p.Ready() && s.Operations == 1:
		b.WriteString("## Review packet: ready\n\n**Ready.** The one operation is ready for review.\n\n")
	case p.Ready():
		fmt.Fprintf(&b, "## Review packet: ready\n\n**Ready.** All %d operations are ready for review.\n\n", s.Operations)
	default:
		b.WriteString("## Review packet: not ready\n\n")
		verb := "are"
		if len(p.Verdict.NotReady) == 1 {
			verb = "is"
		}
		fmt.Fprintf(&b, "**Not ready.** %d of %s %s not ready for review.\n\n", len(p.Verdict.NotReady), plural(s.Operations, "operation", "operations"), verb)
	}
	if sel := p.selectionText(); sel != "" {
		b.WriteString(sel + "\n\n")
	}

	b.WriteString("| figure | value |\n|---|---|\n")
	row := func(k, v string) { fmt.Fprintf(&b, "| %s | %s |\n", k, v) }
	row("operations", fmt.Sprintf("%d (%d ready)", s.Operations, s.ReadyOperations))
	row("remote jobs", fmt.Sprintf("%d intended, %d observed", s.IntendedRemoteJobs, s.ObservedRemoteJobs))
	row("duplicate jobs", strconv.Itoa(s.DuplicateJobs))
	row("estimated cost", s.EstimatedCostUSD.Display())
	row("final cost", s.FinalCostUSD.Display())
	row("pending cost", s.PendingCostUSD.Display())
	row("unpriced attempts", strconv.Itoa(s.UnpricedAttempts))
	row("open next actions", strconv.Itoa(s.OpenNextActions))
	row("breaches", fmt.Sprintf("%d (%d open)", s.Breaches, s.OpenBreaches))
	if !p.GeneratedAt.IsZero() {
		row("generated", stamp(p.GeneratedAt))
	}

	if len(p.Verdict.NotReady) > 0 {
		b.WriteString("\n### Not ready\n\n")
		for _, n := range p.Verdict.NotReady {
			fmt.Fprintf(&b, "- %s (tenant %s): review %s, reconciliation %s", code(n.OperationID), code(n.Tenant), n.ReviewStatus, n.ReconciliationStatus)
			if len(n.NextActions) > 0 {
				acts := make([]string, len(n.NextActions))
				for i, a := range n.NextActions {
					acts[i] = code(a)
				}
				fmt.Fprintf(&b, "; next: %s", strings.Join(acts, ", "))
			}
			b.WriteString("\n")
		}
	}

	b.WriteString("\n### Operations\n\n")
	if len(p.Operations) == 0 {
		b.WriteString("None selected.\n")
	} else {
		b.WriteString("| operation | tenant | tool | review | reconciliation | remote jobs | duplicates | final | pending | next actions | breaches | approval |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, o := range p.Operations {
			r := o.receipt
			approval := "—"
			if o.ApprovalID != 0 {
				approval = "#" + strconv.FormatInt(o.ApprovalID, 10)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %d of %d | %d | %s | %s | %d | %d | %s |\n",
				cellCode(o.OperationID), cellCode(o.Tenant), cellCode(o.Tool), o.ReviewStatus, o.ReconciliationStatus,
				r.ObservedRemoteJobs, r.IntendedRemoteJobs, r.DuplicateJobs, r.FinalCostUSD.Display(), r.PendingCostUSD.Display(),
				len(r.NextActions), len(r.Breaches), approval)
		}
	}

	b.WriteString("\n### Approvals\n\n")
	if len(p.Approvals) == 0 {
		b.WriteString("No operation ran under an approval.\n")
	} else {
		b.WriteString("| approval | tenant | operation ID | tool | ceiling | remote jobs | retry policy | given | expires | given by | used by |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, a := range p.Approvals {
			expires := stamp(a.ExpiresAt)
			if !a.RevokedAt.IsZero() {
				expires += ", revoked " + stamp(a.RevokedAt)
			}
			by := "not recorded"
			if a.GivenBy != "" {
				by = cellCode(a.GivenBy)
			}
			used := make([]string, len(a.UsedBy))
			for i, id := range a.UsedBy {
				used[i] = cellCode(id)
			}
			fmt.Fprintf(&b, "| #%d | %s | %s | %s | %s | %d | %s | %s | %s | %s | %s |\n",
				a.ID, cellCode(a.Tenant), cellCode(a.OperationID), cellCode(a.Tool), a.MaxTotalCost.String()+" "+inert.Markdown(a.Currency),
				a.MaxRemoteJobs, cellCode(a.RetryPolicy), stamp(a.CreatedAt), expires, by, strings.Join(used, ", "))
		}
	}

	if len(p.Budgets) > 0 {
		b.WriteString("\n### Budgets\n\n")
		b.WriteString("| budget | scope | period | ceiling | remote jobs | spent by this run | breached | used by | not covered, waited for an approver |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
		for _, bg := range p.Budgets {
			scope := []string{}
			for _, t := range bg.Tools {
				scope = append(scope, cellCode(t))
			}
			if bg.ToolPrefix != "" {
				scope = append(scope, cellCode(bg.ToolPrefix+"*"))
			}
			if len(scope) == 0 {
				scope = append(scope, "every tool")
			}
			if bg.RunID != "" {
				scope = append(scope, "run "+cellCode(bg.RunID))
			}
			used := make([]string, len(bg.UsedBy))
			for i, id := range bg.UsedBy {
				used[i] = cellCode(id)
			}
			breached := "no"
			if bg.Breached {
				breached = "**yes**"
			}
			waited := make([]string, len(bg.NotCovered))
			for i, id := range bg.NotCovered {
				waited[i] = cellCode(id)
			}
			fmt.Fprintf(&b, "| #%d | %s | %s (%s) | %s | %d | %s | %s | %s | %s |\n", bg.ID, strings.Join(scope, ", "), inert.Markdown(bg.Period), inert.Markdown(bg.TimeZone),
				bg.MaxTotalCost.Display(), bg.MaxRemoteJobs, bg.Spent.Display(), breached, strings.Join(used, ", "), strings.Join(waited, ", "))
		}
	}

	b.WriteString("\n### Receipts\n\n")
	b.WriteString(p.verificationText() + "\n")
	for _, o := range p.Operations {
		r := o.receipt
		fmt.Fprintf(&b, "\n<details>\n<summary><code>%s</code>: %s, reconciliation %s, %s final</summary>\n\n",
			html.EscapeString(inert.Terminal(o.OperationID)), o.ReviewStatus, o.ReconciliationStatus, r.FinalCostUSD.Display())
		// The receipt's Markdown escapes its data itself: no tag from it
		// can close this fold or open another.
		b.Write(r.Markdown())
		form := "provisional"
		if !o.Provisional {
			form = fmt.Sprintf("issued, version %d, sha256 %s", o.ReceiptVersion, o.ReceiptDigest)
		}
		fmt.Fprintf(&b, "\n<details>\n<summary>Embedded receipt (%s)</summary>\n\n", form)
		fence(&b, o.Receipt)
		b.WriteString("\n</details>\n</details>\n")
	}
	return b.Bytes()
}

// selectionText says in one line how the operations were chosen.
func (p *Packet) selectionText() string {
	sel := p.Selection
	var parts []string
	if sel.RunID != "" {
		parts = append(parts, "run "+code(sel.RunID))
	}
	if sel.SessionID != "" {
		parts = append(parts, "session "+code(sel.SessionID))
	}
	if sel.Tenant != "" {
		parts = append(parts, "tenant "+code(sel.Tenant))
	}
	if !sel.Since.IsZero() {
		parts = append(parts, "accepted since "+stamp(sel.Since))
	}
	if !sel.Until.IsZero() {
		parts = append(parts, "accepted before "+stamp(sel.Until))
	}
	if len(sel.OperationIDs) > 0 {
		ids := make([]string, len(sel.OperationIDs))
		for i, id := range sel.OperationIDs {
			ids[i] = code(id)
		}
		parts = append(parts, "operation IDs "+strings.Join(ids, ", "))
	}
	if len(parts) == 0 {
		return ""
	}
	return "Operations of " + strings.Join(parts, ", ") + "."
}

// verificationText says how a reviewer can check the included receipts.
func (p *Packet) verificationText() string {
	v := p.Verification
	var parts []string
	if v.IssuedReceipts > 0 {
		keys := "the gateway's published receipt keys"
		if v.JWKS != "" {
			keys = code(v.JWKS)
		}
		parts = append(parts, fmt.Sprintf("%s included as issued, each named by its version and the SHA-256 of its DSSE envelope as the gateway stores it. "+
			"`taskgate packet --format dsse` signs the packet as an in-toto statement over those digests; "+
			"`taskgate packet verify FILE --jwks JWKS` checks it and each receipt against %s.", count(v.IssuedReceipts, "receipt is", "receipts are"), keys))
	}
	if v.ProvisionalReceipts > 0 {
		parts = append(parts, fmt.Sprintf("%s provisional: not issued yet, so unsigned and liable to change.", count(v.ProvisionalReceipts, "receipt is", "receipts are")))
	}
	if len(parts) == 0 {
		return "The packet includes no receipt."
	}
	return strings.Join(parts, " ")
}

// count writes n with the singular or the plural noun phrase.
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// fence writes raw as a fenced JSON code block whose fence no backtick run
// inside raw can close, bidi and invisible characters written as JSON
// escapes ([inert.JSON]): the same document, which verifies as signed.
func fence(b *bytes.Buffer, raw json.RawMessage) {
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, raw, "", "  "); err != nil {
		pretty.Reset()
		pretty.Write(raw)
	}
	b.WriteString(inert.MarkdownCodeBlock("json", string(inert.JSON(bytes.TrimRight(pretty.Bytes(), "\n")))))
}

// code and cellCode are where the packet's own Markdown shows text of the
// ledger's: as a code span on one line ([inert.MarkdownCode]), in a table
// cell with its pipes escaped ([inert.MarkdownCodeCell]); an empty value
// shows as a dash.
func code(s string) string {
	if s == "" {
		return "—"
	}
	return inert.MarkdownCode(s)
}

func cellCode(s string) string {
	if s == "" {
		return "—"
	}
	return inert.MarkdownCodeCell(s)
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format(time.RFC3339)
}

// plural counts n things: "1 operation", "3 operations".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
