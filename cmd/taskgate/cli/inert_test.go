package cli_test

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/taskgate/taskgate/canon"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata from the current output")

// Hostile text as an agent or a provider could have put it in the ledger
// before acceptance restricted operation IDs: escape sequences that clear
// the screen and set the terminal title, a Markdown image that fakes a
// verdict and a script link, a bidi override and zero-width characters.
const (
	inertClear   = "\x1b[2J"
	inertTitle   = "\x1b]0;title\a"
	inertImage   = "![verdict: ready](http://x/y.png)"
	inertLink    = "[click](javascript:alert(1))"
	inertOpID    = "op-" + inertClear + inertTitle + inertImage + inertLink + "-bidi-\u202eexe.txt\u200b"
	inertJobID   = "job-" + inertTitle + inertLink + "\u2066x\u2069"
	inertChargeS = "ch-" + inertImage + inertClear + "\u200d"
	inertURL     = "http://svc:PASS@host/mcp?api_key=SECRET"
)

// inertLedger holds one completed operation of acme in run run-inert whose
// operation ID, arguments, remote job ID, charge ID, provider evidence and
// reconciliation detail are hostile, bound to an upstream URL with
// credentials.
func inertLedger(t *testing.T) *ledgerFile {
	t.Helper()
	l := newLedger(t)
	ctx := context.Background()
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	args := json.RawMessage(`{"suite":"` + jsonText(inertClear+inertImage+"\u202e") + `"}`)
	fp, err := canon.Compute("hosted_test", "run_suite", args)
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.store.Accept(ctx, &ledger.AcceptParams{
		Tenant: "acme", OperationID: inertOpID, Upstream: "hosted_test", Tool: "run_suite", Fingerprint: string(fp),
		Arguments: args, RequestID: "req-inert-1", TaskID: "task-inert-1", Source: "test", RunID: "run-inert",
		RetryPolicy: ledger.RetryLookupThenAttach, Priced: true, Now: at,
		Approval: ledger.ApprovalRequirement{Estimate: money.MustParse("18.00", "USD")},
	})
	if err != nil || res.Decision != ledger.DecisionCreated {
		t.Fatalf("Accept = %+v, %v; want created", res, err)
	}
	op := l.sending(t, res.Operation)
	final := money.MustParse("17.84", "USD")
	answer := `{"status":"completed","note":"` + inertClear + inertImage + "\u202e" + `"}`
	if _, err := l.store.Transition(ctx, &ledger.TransitionParams{
		OperationRef: op.ID, From: []ledger.State{ledger.StateSending}, To: ledger.StateCompleted, Now: at.Add(time.Minute),
		Result: json.RawMessage(`{"content":[{"type":"text","text":"suite passed"}]}`),
		RemoteJobs: []*ledger.RemoteJobUpsert{{
			Upstream: "hosted_test", Endpoint: inertURL, RemoteJobID: inertJobID, Kind: ledger.JobKindProviderJob, Status: ledger.JobCompleted, Intended: new(true),
		}},
		Charges: []*ledger.ChargeUpsert{{RemoteJobID: inertJobID, ProviderChargeID: inertChargeS, Amount: final, Status: ledger.ChargeFinal, Source: "test"}},
		Creator: &ledger.AttemptKnowledge{RemoteAccepted: ledger.Yes, RemoteEffect: ledger.Yes, ChargeStatus: ledger.Yes},
		Events: []ledger.EventParams{
			{Kind: ledger.EventRemoteJobBound, Data: map[string]string{"remote_job_id": inertJobID}},
			{Kind: ledger.EventResultStored, Data: map[string]string{"remote_job_id": inertJobID}},
			{Kind: ledger.EventReconciled, Data: ledger.ReconciledData{
				Lookup: "answered", Complete: true, Detail: "provider said " + inertTitle + inertLink,
				Evidence: []ledger.ProviderRecord{{RemoteJobID: inertJobID, Kind: ledger.RecordStatus, Tool: "get_job", Answer: answer}},
			}},
		},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.store.ApprovalCreate(ctx, &ledger.Approval{
		Tenant: "acme", OperationID: inertOpID, Tool: "hosted_test.run_suite" + inertClear, MaxTotalCost: money.MustParse("20.00", "USD"),
		MaxRemoteJobs: 1, RetryPolicy: ledger.RetryLookupThenAttach, ExpiresAt: time.Now().Add(time.Hour), CreatedBy: "dana\u202e",
	}); err != nil {
		t.Fatal(err)
	}
	waitingCall(t, l.store, "wait-"+inertTitle+inertImage+"\u202e", "smoke")
	return l
}

// jsonText is s as the inside of a JSON string.
func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

func TestHostileTextIsInert(t *testing.T) {
	l := inertLedger(t)
	packet := l.run(t, "packet", "--run", "run-inert", "--format", "md")
	if packet.code != 0 && packet.code != 2 {
		t.Fatalf("packet: exit %d, stderr %s", packet.code, packet.stderr)
	}
	// How an output shows text: to a terminal, as Markdown, or as data
	// (JSON, YAML) that keeps it exact but for the upstream's credentials.
	const (
		terminal = iota
		markdown
		data
	)
	outputs := []struct {
		name, golden, out string
		kind              int
	}{
		{"ops show", "inert_ops_show.golden", l.ok(t, "ops", "show", inertOpID), terminal},
		{"receipt --format md", "inert_receipt_md.golden", l.ok(t, "receipt", inertOpID, "--format", "md"), markdown},
		{"packet --format md", "inert_packet_md.golden", packet.stdout, markdown},
		{"ops list", "", l.ok(t, "ops", "list"), terminal},
		{"approval-requests list", "", l.ok(t, "approval-requests", "list", "--tenant", "acme"), terminal},
		{"approvals list", "", l.ok(t, "approvals", "list", "--tenant", "acme"), terminal},
		{"not found error", "", l.run(t, "receipt", inertOpID+"-missing").stderr, terminal},
		{"ops show --json", "", l.ok(t, "ops", "show", inertOpID, "--json"), data},
		{"receipt --format json", "", l.ok(t, "receipt", inertOpID, "--format", "json"), data},
		{"receipt --format yaml", "", l.ok(t, "receipt", inertOpID), data},
		{"packet --format json", "", l.run(t, "packet", "--run", "run-inert", "--format", "json").stdout, data},
	}
	for _, o := range outputs {
		t.Run(o.name, func(t *testing.T) {
			for _, secret := range []string{"PASS", "SECRET"} {
				if strings.Contains(o.out, secret) {
					t.Errorf("%s shows the upstream's credential %s:\n%s", o.name, secret, o.out)
				}
			}
			if o.kind == data {
				return
			}
			if !strings.Contains(o.out, "op-") && !strings.Contains(o.out, "wait-") {
				t.Fatalf("%s shows no hostile operation ID at all:\n%s", o.name, o.out)
			}
			if i := strings.IndexByte(o.out, 0x1b); i >= 0 {
				t.Errorf("%s holds an ESC byte at %d:\n%q", o.name, i, o.out)
			}
			if i := strings.IndexFunc(o.out, invisible); i >= 0 {
				t.Errorf("%s holds an invisible or bidi character at %d:\n%q", o.name, i, o.out)
			}
			if o.kind == markdown {
				for _, line := range liveMarkdown(o.out) {
					for _, live := range []string{"![", "](", "<", "javascript:"} {
						if strings.Contains(line, live) {
							t.Errorf("%s renders %q from data: %q", o.name, live, line)
						}
					}
				}
			}
			if o.golden != "" {
				checkGolden(t, o.golden, normalize(o.out))
			}
		})
	}
}

// invisible reports the characters that reorder or hide text: bidi
// controls and zero-width characters.
func invisible(r rune) bool {
	switch {
	case r >= 0x200b && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x061c, r == 0x2060, r == 0xfeff:
		return true
	}
	return false
}

// liveMarkdown returns each line of md outside fenced code blocks with its
// code spans and backslash-escaped characters taken out: what is left is
// what Markdown would interpret.
func liveMarkdown(md string) []string {
	var lines []string
	fenced := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		// A line that starts with a tag is raw HTML (the packet's folds),
		// where Markdown means nothing: only a tag from data would be live.
		if strings.HasPrefix(line, "<") {
			for _, tag := range []string{"<details>", "</details>", "<summary>", "</summary>", "<code>", "</code>"} {
				line = strings.ReplaceAll(line, tag, "")
			}
			if i := strings.IndexByte(line, '<'); i >= 0 {
				lines = append(lines, line[i:])
			}
			continue
		}
		var b strings.Builder
		for i := 0; i < len(line); {
			switch c := line[i]; {
			case c == '\\' && i+1 < len(line):
				i += 2
			case c == '`':
				n := 0
				for i+n < len(line) && line[i+n] == '`' {
					n++
				}
				closer := regexp.MustCompile("(^|[^`])" + strings.Repeat("`", n) + "([^`]|$)").FindStringIndex(line[i+n:])
				if closer == nil {
					b.WriteString(line[i : i+n])
					i += n
					continue
				}
				i += n + closer[1]
			default:
				b.WriteByte(c)
				i++
			}
		}
		lines = append(lines, b.String())
	}
	return lines
}

var stamps = regexp.MustCompile(`\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?Z`)

// normalize replaces the times a run chooses (generated_at, expiry) so
// that the output can be compared with a golden file.
func normalize(s string) string { return stamps.ReplaceAllString(s, "TIME") }

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestHostileTextIsInert -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (rerun with -update after checking the change):\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}
