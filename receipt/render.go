package receipt

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/taskgate/taskgate/internal/inert"
)

//go:embed receipt.schema.json
var schema string

// Schema returns the JSON Schema (draft 2020-12) of the JSON rendering.
func Schema() []byte { return []byte(schema) }

// DocumentKey is the top-level key of the YAML and JSON renderings.
const DocumentKey = "paid_tool_retry_receipt"

// document wraps a receipt under DocumentKey.
type document struct {
	Receipt *Receipt `json:"paid_tool_retry_receipt" yaml:"paid_tool_retry_receipt"`
}

// YAML renders the receipt as YAML under paid_tool_retry_receipt, money as
// plain decimals and times in RFC 3339 UTC.
func (r *Receipt) YAML() ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(document{r}); err != nil {
		return nil, fmt.Errorf("render receipt of %q as YAML: %w", r.OperationID, err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("render receipt of %q as YAML: %w", r.OperationID, err)
	}
	return buf.Bytes(), nil
}

// JSON renders the receipt as indented JSON under paid_tool_retry_receipt,
// money as decimal strings; it validates against [Schema].
func (r *Receipt) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(document{r}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("render receipt of %q as JSON: %w", r.OperationID, err)
	}
	return append(b, '\n'), nil
}

// Render renders r in format "yaml", "json" or "md" (also "markdown").
func Render(r *Receipt, format string) ([]byte, error) {
	switch strings.ToLower(format) {
	case "yaml", "yml":
		return r.YAML()
	case "json":
		return r.JSON()
	case "md", "markdown":
		return r.Markdown(), nil
	default:
		return nil, fmt.Errorf("unknown receipt format %q; use yaml, json or md", format)
	}
}

// Markdown renders the receipt for a review packet: a one-line summary, the
// key figures, the attempt lineage, remote jobs, charges, breaches, the
// upstream's questions, cancellation facts, the open next actions as a
// checklist and, on a signed receipt, its signature block as text.
func (r *Receipt) Markdown() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "**%s** — %s\n\n", inert.MarkdownCode(r.OperationID), r.summary())

	// Values are rendered before they reach row: data through cell,
	// codeCell or mdText, the receipt's own figures as they are.
	b.WriteString("| figure | value |\n|---|---|\n")
	row := func(k, v string) { fmt.Fprintf(&b, "| %s | %s |\n", k, v) }
	row("operation ID", codeCell(r.OperationID))
	row("tenant", codeCell(r.Tenant))
	row("task", codeCell(r.TaskID))
	row("tool", codeCell(r.Tool))
	row("state", cell(r.State))
	row("intended remote jobs", strconv.Itoa(r.IntendedRemoteJobs))
	row("observed remote jobs", strconv.Itoa(r.ObservedRemoteJobs))
	row("duplicate jobs", strconv.Itoa(r.DuplicateJobs))
	if r.MissingRemoteJobs > 0 {
		row("missing remote jobs", strconv.Itoa(r.MissingRemoteJobs))
	}
	row("attempts", fmt.Sprintf("%d (%d attached), %d denied", r.Attempts, r.AttachedAttempts, r.DeniedAttempts))
	row("estimated cost", r.EstimatedCostUSD.Display())
	row("final cost", r.FinalCostUSD.Display())
	row("pending cost", r.PendingCostUSD.Display())
	row("refunded cost", r.RefundedCostUSD.Display())
	row("unpriced attempts", strconv.Itoa(r.UnpricedAttempts))
	row("result used", codeCell(r.ResultUsed))
	row("reconciliation", cell(string(r.ReconciliationStatus)))
	if l := r.LastReconciliation; l != nil {
		v := fmt.Sprintf("lookup %s at %s", mdText(l.Lookup), stamp(l.At))
		if l.Detail != "" {
			v += ": " + mdText(l.Detail)
		}
		row("last reconciliation", v)
	}
	row("review", cell(string(r.ReviewStatus)))
	if a := r.Approval; a != nil {
		v := fmt.Sprintf("#%d: up to %s and %s, %s, expires %s", a.ID, a.MaxTotalCost.Display(), plural(a.MaxRemoteJobs, "remote job"), mdText(a.RetryPolicy), stamp(a.ExpiresAt))
		if !a.RevokedAt.IsZero() {
			v += ", revoked " + stamp(a.RevokedAt)
		}
		row("approval", v)
		row("approval headroom", fmt.Sprintf("%s, %s", a.HeadroomUSD.Display(), plural(a.RemoteJobsHeadroom, "remote job")))
		if a.ApprovedBy != "" {
			row("approved by", codeCell(a.ApprovedBy))
		}
	}
	for _, b := range r.Budgets {
		v := fmt.Sprintf("#%d: up to %s and %s per %s (%s), %s %s", b.ID, b.MaxTotalCost.Display(), plural(b.MaxRemoteJobs, "remote job"),
			mdText(b.Period), mdText(b.TimeZone), mdText(b.Status), b.Reserved.Display())
		if b.Breached {
			v += ", **breached**"
		}
		row("covered by budget", v)
	}
	if q := r.ApprovalRequest; q != nil {
		v := fmt.Sprintf("#%d, %s", q.ID, mdText(q.Status))
		switch {
		case q.ApprovedBy != "":
			v += " by " + codeCell(q.ApprovedBy)
		case q.DeclinedBy != "":
			v += " by " + codeCell(q.DeclinedBy)
		}
		if !q.DecidedAt.IsZero() {
			v += " at " + stamp(q.DecidedAt)
		}
		if q.Note != "" {
			v += ": " + mdText(q.Note)
		}
		if q.RequestedBy != "" {
			v += "; requested by " + codeCell(q.RequestedBy)
		}
		if !q.RequestedAt.IsZero() {
			v += " at " + stamp(q.RequestedAt)
		}
		row("approval request", v)
	}
	if !r.GeneratedAt.IsZero() {
		row("generated", stamp(r.GeneratedAt))
	}
	if r.ChainHead != "" {
		row("chain head", codeCell(r.ChainHead))
	}

	b.WriteString("\n### Attempts\n\n")
	if len(r.Lineage) == 0 {
		b.WriteString("None recorded.\n")
	} else {
		b.WriteString("| request | operation ID | decision | reason | client | remote accepted | remote effect | charged | at |\n|---|---|---|---|---|---|---|---|---|\n")
		for _, a := range r.Lineage {
			tableRow(&b, codeCell(a.RequestID), codeCell(a.OperationID), cell(a.Decision), cell(a.Reason), cell(a.ClientResult),
				cell(a.RemoteAccepted), cell(a.RemoteEffect), cell(a.ChargeStatus), own(stamp(a.At)))
		}
		for _, a := range r.Lineage {
			if a.TraceID != "" {
				fmt.Fprintf(&b, "\nAttempt %s was served in trace %s.\n", codeCell(a.RequestID), codeCell(a.TraceID))
			}
		}
	}

	b.WriteString("\n### Remote jobs\n\n")
	if len(r.RemoteJobs) == 0 {
		b.WriteString("None observed.\n")
	} else {
		b.WriteString("| remote job | upstream | endpoint | kind | status | intended | duplicate | completed | cancel requested | effect reversed |\n|---|---|---|---|---|---|---|---|---|---|\n")
		for _, j := range r.RemoteJobs {
			dup := yesNo(j.Duplicate)
			if j.Duplicate {
				dup += " (" + mdText(j.DuplicateResolved) + ")"
			}
			cancel := yesNo(j.CancelRequested)
			if j.CancelRequested {
				cancel += ", " + stamp(j.CancelRequestedAt)
			}
			tableRow(&b, codeCell(j.RemoteJobID), codeCell(j.Upstream), codeCell(j.Endpoint), cell(j.Kind), cell(j.Status),
				yesNo(j.Intended), dup, own(stamp(j.CompletedAt)), cancel, cell(j.EffectReversed))
		}
	}

	if slices.ContainsFunc(r.RemoteJobs, func(j RemoteJob) bool { return len(j.Evidence) > 0 }) {
		b.WriteString("\n### Provider evidence\n\n| remote job | record | tool | seen | answer |\n|---|---|---|---|---|\n")
		for _, j := range r.RemoteJobs {
			for _, ev := range j.Evidence {
				tableRow(&b, codeCell(j.RemoteJobID), cell(ev.Record), codeCell(ev.Tool), own(stamp(ev.SeenAt)), codeCell(ev.Answer))
			}
		}
	}

	b.WriteString("\n### Charges\n\n")
	if len(r.Charges) == 0 {
		b.WriteString("None recorded.\n")
	} else {
		if slices.ContainsFunc(r.Charges, func(c Charge) bool { return c.Kind != "" }) {
			b.WriteString("| charge | remote job | kind | amount | status |\n|---|---|---|---|---|\n")
			for _, c := range r.Charges {
				tableRow(&b, codeCell(c.ChargeID), codeCell(c.RemoteJobID), cell(c.Kind), c.Amount.String()+" "+mdText(c.Currency), cell(c.Status))
			}
		} else {
			b.WriteString("| charge | remote job | amount | status |\n|---|---|---|---|\n")
			for _, c := range r.Charges {
				tableRow(&b, codeCell(c.ChargeID), codeCell(c.RemoteJobID), c.Amount.String()+" "+mdText(c.Currency), cell(c.Status))
			}
		}
	}

	if len(r.Breaches) > 0 {
		b.WriteString("\n### Breaches\n\n")
		for _, br := range r.Breaches {
			state := "settled"
			if br.Open {
				state = "open"
			}
			fmt.Fprintf(&b, "- **%s** (%s): final cost %s", mdText(br.Kind), state, br.FinalCostUSD.Display())
			if br.CeilingUSD != nil {
				fmt.Fprintf(&b, ", ceiling %s, over by %s", br.CeilingUSD.Display(), br.OverByUSD.Display())
			}
			if br.ChargeID != "" {
				fmt.Fprintf(&b, "; crossed by charge %s", inert.MarkdownCode(br.ChargeID))
			}
			b.WriteString("\n")
		}
	}

	if len(r.Questions) > 0 {
		b.WriteString("\n### Questions from the upstream\n\n")
		for _, q := range r.Questions {
			fmt.Fprintf(&b, "- Send %d asked %s at %s: %s", q.Send, mdText(strings.Join(q.Keys, ", ")), stamp(q.AskedAt), mdText(string(q.Answer)))
			if q.Action != "" {
				fmt.Fprintf(&b, " (%s)", mdText(q.Action))
			}
			if !q.AnsweredAt.IsZero() {
				fmt.Fprintf(&b, " at %s", stamp(q.AnsweredAt))
			}
			b.WriteString("\n")
		}
	}

	if c := r.Cancellation; c != nil {
		b.WriteString("\n### Cancellation\n\n")
		fmt.Fprintf(&b, "- Client stopped watching: %s\n", yesNoAt(c.ClientStoppedWatching, c.ClientStoppedWatchingAt))
		fmt.Fprintf(&b, "- Cancellation requested: %s\n", yesNoAt(c.CancellationRequested, c.CancellationRequestedAt))
		fmt.Fprintf(&b, "- Requested after the effect: %s\n", yesNo(c.RequestedAfterEffect))
		if c.EffectReversed != "" {
			fmt.Fprintf(&b, "- Effect reversed: %s\n", mdText(c.EffectReversed))
		}
		if c.KeptByPolicy != "" {
			fmt.Fprintf(&b, "- Kept by policy: the call was already sent, and client_cancel: %s ran the job to its end\n", mdText(c.KeptByPolicy))
		}
	}

	b.WriteString("\n### Next actions\n\n")
	if len(r.NextActions) == 0 {
		b.WriteString("None open.\n")
	}
	for _, a := range r.NextActions {
		fmt.Fprintf(&b, "- [ ] %s — %s", inert.MarkdownCode(a.Action+" "+a.Target), mdText(a.Reason))
		var tail []string
		if a.Owner != "" {
			tail = append(tail, "owner "+mdText(a.Owner))
		}
		if !a.Due.IsZero() {
			tail = append(tail, "due "+stamp(a.Due))
		}
		if len(tail) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(tail, ", "))
		}
		b.WriteString("\n")
	}

	if is := r.Issue; is != nil {
		b.WriteString("\n### Issued\n\n")
		fmt.Fprintf(&b, "Version %d, issued %s, signed by key %s as an in-toto statement in a DSSE envelope (`--format dsse`), SHA-256 `%s`.",
			is.Version, stamp(is.IssuedAt), inert.MarkdownCode(is.KeyID), inert.Terminal(is.Digest))
		if is.Previous != "" {
			fmt.Fprintf(&b, " It replaces version %d, SHA-256 `%s`.", is.Version-1, inert.Terminal(is.Previous))
		}
		b.WriteString("\n")
	}
	if r.Provisional {
		b.WriteString("\n### Provisional\n\nNot issued yet: the operation is still open (or no signing key could sign it). This receipt is built from the ledger as it stands, unsigned, and may change.\n")
	}
	if s := r.Signature; s != nil {
		b.WriteString("\n### Signature\n\n")
		fmt.Fprintf(&b, "Signed %s by key %s (%s) over the canonical JSON rendering without this block. ", stamp(s.SignedAt), inert.MarkdownCode(s.KeyID), mdText(s.Algorithm))
		b.WriteString("Check the JSON rendering with `taskgate receipt verify FILE`.\n\n")
		fmt.Fprintf(&b, "```\n%s\n```\n", inert.Terminal(s.JWS))
	}
	return b.Bytes()
}

// summary is the receipt in one line, e.g. "1 remote job, 0 duplicates,
// 17.84 USD final, reconciliation complete, ready for review".
func (r *Receipt) summary() string {
	parts := []string{
		plural(r.ObservedRemoteJobs, "remote job"),
		plural(r.DuplicateJobs, "duplicate"),
		r.FinalCostUSD.Display() + " final",
	}
	if r.PendingCostUSD.Micros != 0 {
		parts = append(parts, r.PendingCostUSD.Display()+" pending")
	}
	parts = append(parts, "reconciliation "+string(r.ReconciliationStatus))
	switch r.ReviewStatus {
	case ReviewReady:
		parts = append(parts, "ready for review")
	case ReviewBlocked:
		parts = append(parts, "review blocked by an open duplicate")
	default:
		parts = append(parts, "needs review")
	}
	return strings.Join(parts, ", ")
}

func plural(n int, noun string) string {
	if n == 1 || n == -1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func yesNo(v bool) string {
	if v {
		return "yes"
	}
	return "no"
}

func yesNoAt(v bool, at time.Time) string {
	if v && !at.IsZero() {
		return "yes, at " + stamp(at)
	}
	return yesNo(v)
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// tableRow writes a table row of cells that cell or codeCell made.
func tableRow(b *bytes.Buffer, cells ...string) {
	b.WriteString("|")
	for _, c := range cells {
		b.WriteString(" " + c + " |")
	}
	b.WriteString("\n")
}

// cell, codeCell and mdText are where the Markdown rendering escapes text,
// the ledger's and the provider's included ([inert.Markdown]): a value
// shows as text, never as a link, an image, HTML or a table break. cell
// and codeCell show an empty value as a dash, so that it is visibly
// missing; codeCell shows an identifier or a provider's answer as a code
// span.
func cell(s string) string {
	if s == "" {
		return "—"
	}
	return inert.Markdown(s)
}

func codeCell(s string) string {
	if s == "" {
		return "—"
	}
	return inert.MarkdownCodeCell(s)
}

func mdText(s string) string { return inert.Markdown(s) }

// own is a cell of the receipt's own text (a time, a count), shown as it
// is.
func own(s string) string {
	if s == "" {
		return "—"
	}
	return s
}
