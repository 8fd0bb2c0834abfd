package packet_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/taskgate/taskgate/packet"
	"github.com/taskgate/taskgate/receipt"
)

// resolvedSchema is the packet's schema with the receipt's, which it
// refers to for unsigned receipts.
func resolvedSchema(t *testing.T) *jsonschema.Resolved {
	t.Helper()
	var s jsonschema.Schema
	if err := json.Unmarshal(packet.Schema(), &s); err != nil {
		t.Fatalf("packet.schema.json does not parse: %v", err)
	}
	if s.Schema != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema = %q, want draft 2020-12", s.Schema)
	}
	loaded := 0
	rs, err := s.Resolve(&jsonschema.ResolveOptions{Loader: func(u *url.URL) (*jsonschema.Schema, error) {
		if u.String() != "https://taskgate.dev/schemas/paid_tool_retry_receipt.schema.json" {
			return nil, fmt.Errorf("unexpected remote schema %s", u)
		}
		loaded++
		var r jsonschema.Schema
		return &r, json.Unmarshal(receipt.Schema(), &r)
	}})
	if err != nil {
		t.Fatalf("resolve schema: %v", err)
	}
	if loaded != 1 {
		t.Fatalf("the packet schema refers to the receipt schema %d times, want once", loaded)
	}
	return rs
}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func TestJSONMatchesSchema(t *testing.T) {
	rs := resolvedSchema(t)
	for _, g := range goldenRuns {
		t.Run(g.name, func(t *testing.T) {
			b, err := build(t, g).JSON()
			if err != nil {
				t.Fatal(err)
			}
			if err := rs.Validate(decode(t, b)); err != nil {
				t.Errorf("JSON rendering does not match the schema: %v", err)
			}
		})
	}

	// The schema must reject what the packet promises never to print.
	inner := func(doc map[string]any) map[string]any { return doc[packet.DocumentKey].(map[string]any) }
	bad := []struct {
		name   string
		mutate func(p map[string]any)
	}{
		{"money as a number", func(p map[string]any) { p["summary"].(map[string]any)["final_cost_usd"] = 58.78 }},
		{"a ready verdict that lists an operation", func(p map[string]any) { p["verdict"].(map[string]any)["status"] = "ready" }},
		{"a verdict that is neither", func(p map[string]any) { p["verdict"].(map[string]any)["status"] = "approved" }},
		{"an unsigned receipt that is not a receipt", func(p map[string]any) {
			r := p["operations"].([]any)[0].(map[string]any)["receipt"].(map[string]any)["paid_tool_retry_receipt"].(map[string]any)
			delete(r, "review_status")
		}},
		{"an unsigned receipt as a string", func(p map[string]any) {
			p["operations"].([]any)[0].(map[string]any)["receipt"] = "eyJhbGciOiJFZERTQSJ9.e30.c2ln"
		}},
		{"an approval without who gave it", func(p map[string]any) { delete(p["approvals"].([]any)[0].(map[string]any), "given_by") }},
		{"an unlisted field", func(p map[string]any) { p["surprise"] = true }},
		{"local time", func(p map[string]any) { p["generated_at"] = "2026-05-04T12:00:00+02:00" }},
	}
	for _, tt := range bad {
		t.Run("rejects "+tt.name, func(t *testing.T) {
			b, err := build(t, goldenRuns[3]).JSON()
			if err != nil {
				t.Fatal(err)
			}
			doc := decode(t, b)
			tt.mutate(inner(doc))
			if err := rs.Validate(doc); err == nil {
				t.Errorf("schema accepted a packet with %s", tt.name)
			}
		})
	}
}

// TestRunFigures pins what the run of three operations adds up to.
func TestRunFigures(t *testing.T) {
	p := build(t, goldenRuns[3])
	s := p.Summary
	got := fmt.Sprintf("%d %d %d %d %d %s %s %s %d %d %d %d", s.Operations, s.ReadyOperations, s.IntendedRemoteJobs, s.ObservedRemoteJobs,
		s.DuplicateJobs, s.EstimatedCostUSD, s.FinalCostUSD, s.PendingCostUSD, s.UnpricedAttempts, s.OpenNextActions, s.Breaches, s.OpenBreaches)
	if want := "3 2 3 4 1 54.00 58.78 0.00 1 3 1 1"; got != want {
		t.Errorf("summary = %q, want %q", got, want)
	}
	want := []packet.NotReady{{
		OperationID: "suite-breach", Tenant: "acme", ReviewStatus: receipt.ReviewNeedsReview, ReconciliationStatus: receipt.ReconciliationComplete,
		NextActions: []string{"request_refund suite-breach-charge-1", "preserve_evidence suite-breach"},
	}}
	if !reflect.DeepEqual(p.Verdict.NotReady, want) {
		t.Errorf("not ready = %+v, want %+v", p.Verdict.NotReady, want)
	}
	var given []string
	for _, a := range p.Approvals {
		given = append(given, fmt.Sprintf("#%d %s %v", a.ID, a.GivenBy, a.UsedBy))
	}
	if want := "#7 dana [suite-clean]; #8 dana [suite-duplicate]; #9 elicitation [suite-breach]"; strings.Join(given, "; ") != want {
		t.Errorf("approvals = %q, want %q", strings.Join(given, "; "), want)
	}
	if duplicateResolved(t, p.Operations[1]) != "cancelled" {
		t.Errorf("the duplicate of suite-duplicate is not shown cancelled in its embedded receipt")
	}
}

// receiptDuplicate reads the duplicate_resolved of the second remote job
// in an operation's embedded unsigned receipt.
func duplicateResolved(t *testing.T, o packet.Operation) string {
	t.Helper()
	var doc struct {
		Receipt struct {
			RemoteJobs []struct {
				DuplicateResolved string `json:"duplicate_resolved"`
			} `json:"remote_jobs"`
		} `json:"paid_tool_retry_receipt"`
	}
	if err := json.Unmarshal(o.Receipt, &doc); err != nil || len(doc.Receipt.RemoteJobs) != 2 {
		t.Fatalf("embedded receipt %s: %v", o.Receipt, err)
	}
	return doc.Receipt.RemoteJobs[1].DuplicateResolved
}

func TestEmptyPacketIsReady(t *testing.T) {
	p, err := packet.Build(&packet.Input{Selection: packet.Selection{RunID: "ci-none"}})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Ready() || p.Summary.Operations != 0 || p.Summary.FinalCostUSD.String() != "0.00" {
		t.Errorf("empty packet: ready %v, summary %+v", p.Ready(), p.Summary)
	}
	b, err := p.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := resolvedSchema(t).Validate(decode(t, b)); err != nil {
		t.Errorf("empty packet does not match the schema: %v", err)
	}
	if md := string(p.Markdown()); !strings.Contains(md, "No operations were selected") || !strings.Contains(md, "None selected.") {
		t.Errorf("empty packet's Markdown:\n%s", md)
	}
}

// TestMarkdownKeepsItsShape: caller-chosen text — an operation ID with
// backticks, pipes, a newline and HTML — stays inside its code span,
// table cell and fold.
func TestMarkdownKeepsItsShape(t *testing.T) {
	in := costBreach()
	hostile := "op`x`|y\n</details><b>z</b>``"
	in.Operation.OperationID = hostile
	in.Approval.OperationID = hostile
	in.Approval.CreatedBy = "eve | mallory"
	p, err := packet.Build(&packet.Input{Selection: packet.Selection{RunID: "run `1`", OperationIDs: []string{hostile}}, Operations: provisional(in)})
	if err != nil {
		t.Fatal(err)
	}
	md := string(p.Markdown())
	// HTML counts only outside code, where GitHub would render it.
	html := outsideCode(md)
	if open, closed := strings.Count(html, "<details>"), strings.Count(html, "</details>"); open != 2 || closed != 2 {
		t.Errorf("Markdown has %d <details> and %d </details> outside code; want 2 of each:\n%s", open, closed, md)
	}
	if strings.Contains(html, "<b>") {
		t.Errorf("Markdown lets a tag from the ledger through outside code:\n%s", md)
	}
	for _, want := range []string{
		"``` op`x`|y\\n</details><b>z</b>`` ```",       // the list of operations that are not ready, the newline shown
		"| ``` op`x`\\|y\\n</details><b>z</b>`` ``` |", // its table cell, pipe escaped
		"<summary><code>op`x`|y\\n&lt;/details&gt;&lt;b&gt;z&lt;/b&gt;``</code>",
		"| `eve \\| mallory` |",
		"Operations of run `` run `1` ``",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
	// Every table row has as many unescaped pipes as its header.
	var header int
	for _, line := range strings.Split(md, "\n") {
		if !strings.HasPrefix(line, "|") {
			header = 0
			continue
		}
		n := len(regexp.MustCompile(`(^|[^\\])\|`).FindAllString(line, -1))
		if header == 0 {
			header = n
		} else if n != header {
			t.Errorf("table row has %d cells' pipes, its header %d: %s", n, header, line)
		}
	}
	b, err := p.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if got := decode(t, b)[packet.DocumentKey].(map[string]any)["operations"].([]any)[0].(map[string]any)["operation_id"]; got != hostile {
		t.Errorf("JSON operation_id = %q, want it unchanged: %q", got, hostile)
	}
}

func TestRenderRefusesUnknownFormat(t *testing.T) {
	if _, err := packet.Render(build(t, goldenRuns[0]), "yaml"); err == nil || !strings.Contains(err.Error(), "use md or json") {
		t.Errorf("Render(yaml) = %v, want an error naming md and json", err)
	}
}

// TestBuildIsPure: building twice from one input gives the same packet and
// leaves the input as it was.
func TestBuildIsPure(t *testing.T) {
	in := &packet.Input{Selection: packet.Selection{RunID: run, Since: t0.In(time.FixedZone("CEST", 7200))}, Operations: provisional(clean(), duplicateCancelled())}
	before := fmt.Sprintf("%+v", *in.Operations[1].Receipt)
	a, err := packet.Build(in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := packet.Build(in)
	if err != nil {
		t.Fatal(err)
	}
	ja, _ := a.JSON()
	jb, _ := b.JSON()
	if string(ja) != string(jb) {
		t.Errorf("two builds of one input differ")
	}
	if after := fmt.Sprintf("%+v", *in.Operations[1].Receipt); after != before {
		t.Errorf("Build changed its input:\nbefore %s\nafter  %s", before, after)
	}
	if !strings.Contains(string(ja), `"since": "2026-05-04T10:00:00Z"`) {
		t.Errorf("selection times are not in UTC:\n%s", ja)
	}
}

// outsideCode is md without its fenced code blocks and inline code spans.
func outsideCode(md string) string {
	var out []string
	fence := ""
	for _, line := range strings.Split(md, "\n") {
		if fence != "" {
			if strings.TrimSpace(line) == fence {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(line, "```") {
			fence = strings.TrimRight(line, "abcdefghijklmnopqrstuvwxyz")
			continue
		}
		out = append(out, withoutSpans(line))
	}
	return strings.Join(out, "\n")
}

// withoutSpans drops the code spans of one line: a run of n backticks up to
// the next run of exactly n.
func withoutSpans(line string) string {
	var b strings.Builder
	for i := 0; i < len(line); {
		if line[i] != '`' {
			b.WriteByte(line[i])
			i++
			continue
		}
		n := backticks(line, i)
		end := -1
		for j := i + n; j < len(line); {
			if line[j] != '`' {
				j++
				continue
			}
			if m := backticks(line, j); m == n {
				end = j + m
				break
			} else {
				j += m
			}
		}
		if end < 0 {
			b.WriteString(line[i : i+n])
			i += n
			continue
		}
		i = end
	}
	return b.String()
}

func backticks(s string, i int) int {
	n := 0
	for i+n < len(s) && s[i+n] == '`' {
		n++
	}
	return n
}
