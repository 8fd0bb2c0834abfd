package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskgate/taskgate/internal/inert"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/dburl"
	"github.com/taskgate/taskgate/packet"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/receipt/issue"
	"github.com/taskgate/taskgate/secrets"
	"github.com/taskgate/taskgate/signingkeys"
)

// exitNotReady is the exit status of a packet whose verdict is not ready:
// apart from 1, so that a CI job can tell a refused merge from a command
// that failed.
const exitNotReady = 2

// Files that packet --out writes.
const (
	packetMarkdownFile = "packet.md"
	packetJSONFile     = "packet.json"
	packetJWKSFile     = "jwks.json"
)

// packetRequest is what one packet command asks for.
type packetRequest struct {
	sel        packet.Selection
	format     string
	out        string
	allowEmpty bool
	now        time.Time
}

// signed reports whether the request is for a signed packet, which needs
// the signing key.
func (r *packetRequest) signed() bool {
	return strings.EqualFold(r.format, issue.FormatDSSE) || strings.EqualFold(r.format, issue.FormatSigstoreBundle)
}

const packetHint = "taskgate packet --run ci-4711 --format md"

func (e *env) packetCmd() *cobra.Command {
	var (
		req                   packetRequest
		since, until, cfgPath string
	)
	cmd := &cobra.Command{
		Use:   "packet [OPERATION_ID...] [--run ID] [--session ID] [--tenant T] [--since T] [--until T]",
		Short: "Render a run's review packet: summary, every receipt, the approvals and a verdict; exit 2 unless all are ready",
		Long: "packet gathers the operations of one agent run and renders its review packet: a summary (operations,\n" +
			"remote jobs intended and observed, duplicates, estimated, final and pending cost, unpriced attempts,\n" +
			"open next actions, breaches), each operation's receipt, the approvals they ran under and who gave\n" +
			"them, and a verdict. The verdict is ready only when every operation's review_status is ready.\n\n" +
			"Operations are selected by run (--run, the run ID a client passed as _meta \"dev.taskgate/run-id\";\n" +
			"--session, the MCP session its calls came on), by tenant, by when they were accepted (--since, --until)\n" +
			"and by operation ID (the arguments); given together, an operation must match them all. A run holds\n" +
			"the operations its created and attached attempts reached, oldest first.\n\n" +
			"Each operation's receipt is the one the gateway issued (its latest version, named by the SHA-256 of its\n" +
			"stored DSSE envelope), or, for an operation still open, a provisional receipt, marked so. Reading them\n" +
			"needs no key.\n\n" +
			"--format md (GitHub-flavoured Markdown, for a pull-request comment) or json (packet/packet.schema.json)\n" +
			"goes to stdout. --out DIR writes packet.md and packet.json there instead, with jwks.json, the keys\n" +
			"that verify the issued receipts.\n" +
			"--format dsse signs the packet, as the gateway issues a receipt, with the active signing key: an in-toto\n" +
			"statement (" + packet.PredicateType + ") whose subjects are the issued receipts, each\n" +
			"named receipt/TENANT/OPERATION_ID/vN with its digest, in a DSSE envelope; sigstore-bundle writes it in a\n" +
			"Sigstore bundle. Signing needs the secrets keys that encrypt the key (--config's secrets.key_file, or\n" +
			secrets.EnvKeys + "). taskgate packet verify checks a signed packet and its receipts.\n\n" +
			"Exit status: 0 when the verdict is ready, 2 when it is not (after rendering the packet), 1 when no\n" +
			"packet could be made: bad flags, an unreachable ledger, or nothing selected (unless --allow-empty).",
		Example: "  taskgate packet --run ci-4711 --format md > packet.md\n" +
			"  taskgate packet --run ci-4711 --out review/\n" +
			"  taskgate packet --tenant acme --since 24h --format json\n" +
			"  taskgate packet --run ci-4711 --format dsse --config taskgate.yaml > packet.dsse.json\n" +
			"  taskgate packet settlement-regression-842 suite-7 --tenant acme",
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			req.now = time.Now()
			req.sel.OperationIDs = args
			if err := req.parse(cmd, since, until); err != nil {
				return err
			}
			var (
				s    ledger.Store
				ring *secrets.Ring
				err  error
			)
			// Reading receipts needs no key; signing the packet does.
			if req.signed() {
				s, ring, _, err = e.signingLedger(cmd, cfgPath)
			} else {
				s, err = e.receiptLedger(cmd, cfgPath)
			}
			if err != nil {
				return err
			}
			defer s.Close()
			p, err := e.writePacket(cmd.Context(), s, ring, &req)
			if errors.Is(err, signingkeys.ErrNoRing) {
				return noSigningRing(cmd, err)
			}
			if errors.Is(err, issue.ErrNoKey) {
				return &usageError{msg: err.Error(), hint: "taskgate signing-keys create --config taskgate.yaml"}
			}
			if err != nil {
				return err
			}
			if n := p.Verification.ProvisionalReceipts; n > 0 {
				fmt.Fprintf(e.stderr, "%d of %d receipts are provisional: their operations are still open, or no signing key could sign them when they were final (taskgate receipt issue).\n", n, p.Summary.Operations)
			}
			if !p.Ready() {
				fmt.Fprintf(e.stderr, "review packet: not ready: %s\n", notReadyText(p))
				return &exitError{code: exitNotReady}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfgPath, "config", "", "the gateway's configuration: its database and, to sign, the secrets keys that open the signing key")
	f.StringVar(&req.sel.RunID, "run", "", "the run ID the client passed as _meta \"dev.taskgate/run-id\"")
	f.StringVar(&req.sel.SessionID, "session", "", "the MCP session the run's calls came on (2025-11-25 sessions)")
	f.StringVar(&req.sel.Tenant, "tenant", "", "only this tenant's operations")
	f.StringVar(&since, "since", "", "only operations accepted at or after this RFC 3339 time, or this long ago (24h)")
	f.StringVar(&until, "until", "", "only operations accepted before this RFC 3339 time, or this long ago")
	f.StringVar(&req.format, "format", "md", "md, json, dsse (the packet signed as an in-toto statement) or sigstore-bundle (that in a Sigstore bundle), printed to stdout")
	f.StringVar(&req.out, "out", "", "write packet.md, packet.json and, when the ledger has signing keys, jwks.json into this directory instead")
	f.BoolVar(&req.allowEmpty, "allow-empty", false, "render a packet (verdict ready) when nothing matches, instead of failing")
	cmd.AddCommand(e.packetVerifyCmd())
	return cmd
}

// parse checks the flags and reads the times.
func (r *packetRequest) parse(cmd *cobra.Command, since, until string) error {
	sel := &r.sel
	if sel.RunID == "" && sel.SessionID == "" && sel.Tenant == "" && since == "" && until == "" && len(sel.OperationIDs) == 0 {
		return &usageError{msg: "say which operations the packet covers: --run, --session, --tenant, --since, --until or operation IDs", hint: packetHint}
	}
	for name, v := range map[string]string{"run": sel.RunID, "session": sel.SessionID, "tenant": sel.Tenant} {
		if cmd.Flags().Changed(name) && strings.TrimSpace(v) == "" {
			return &usageError{msg: fmt.Sprintf("--%s is empty", name), hint: packetHint}
		}
	}
	if !slices.Contains([]string{"md", "json", issue.FormatDSSE, issue.FormatSigstoreBundle}, strings.ToLower(r.format)) {
		return &usageError{msg: fmt.Sprintf("--format %q is not a review packet format; use md, json, dsse or sigstore-bundle", r.format), hint: packetHint}
	}
	if r.out != "" && cmd.Flags().Changed("format") {
		return &usageError{msg: "--out writes both formats; drop --format, or drop --out to print one", hint: "taskgate packet --run ci-4711 --out review/"}
	}
	var err error
	if sel.Since, err = packetTime("since", since, r.now); err != nil {
		return err
	}
	if sel.Until, err = packetTime("until", until, r.now); err != nil {
		return err
	}
	if !sel.Since.IsZero() && !sel.Until.IsZero() && !sel.Since.Before(sel.Until) {
		return &usageError{msg: fmt.Sprintf("--since %s is not before --until %s, so no operation could match", stamp(sel.Since), stamp(sel.Until)), hint: "taskgate packet --since 48h --until 24h"}
	}
	return nil
}

// packetTime reads --since or --until: an RFC 3339 time, or a duration
// meaning that long before now. Empty is no bound.
func packetTime(flag, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t.UTC(), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return time.Time{}, &usageError{
			msg:  fmt.Sprintf("--%s %q is neither an RFC 3339 time (2026-05-04T10:00:00Z) nor a duration ago (24h)", flag, v),
			hint: "taskgate packet --tenant acme --" + flag + " 24h",
		}
	}
	return now.Add(-d).UTC(), nil
}

// writePacket gathers the selected operations' receipts from s as issued
// (provisional while not), builds the packet and writes it as r asks: to
// stdout in r.format, signed with ring's key for dsse and sigstore-bundle,
// or into r.out.
func (e *env) writePacket(ctx context.Context, s ledger.Store, ring *secrets.Ring, r *packetRequest) (*packet.Packet, error) {
	ops, err := selectOperations(ctx, s, &r.sel)
	if err != nil {
		return nil, err
	}
	if len(ops) == 0 && !r.allowEmpty {
		return nil, fmt.Errorf("no operations in ledger %s match %s; check the selection, or pass --allow-empty to render an empty packet",
			dburl.Describe(e.db), selectionText(&r.sel))
	}
	in := &packet.Input{Selection: r.sel, Now: r.now}
	for _, op := range ops {
		inc, err := included(ctx, s, op, r.now)
		if err != nil {
			return nil, err
		}
		in.Operations = append(in.Operations, inc)
	}
	if r.out == "" {
		p, err := packet.Build(in)
		if err != nil {
			return nil, err
		}
		var b []byte
		if r.signed() {
			b, err = signPacket(ctx, s, ring, p, r.format)
		} else {
			b, err = packet.Render(p, r.format)
		}
		if err != nil {
			return nil, err
		}
		_, err = e.stdout.Write(b)
		return p, err
	}

	keys, err := s.SigningKeyList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the keys that verify the receipts: %w", err)
	}
	var jwks []byte
	if len(keys) > 0 {
		if jwks, err = signingkeys.JWKS(keys); err != nil {
			return nil, fmt.Errorf("get the keys that verify the receipts: %w", err)
		}
		in.JWKS = packetJWKSFile
	}
	p, err := packet.Build(in)
	if err != nil {
		return nil, err
	}
	js, err := p.JSON()
	if err != nil {
		return nil, err
	}
	type file struct {
		name string
		data []byte
	}
	files := []file{{packetMarkdownFile, p.Markdown()}, {packetJSONFile, js}}
	if jwks != nil {
		files = append(files, file{packetJWKSFile, jwks})
	}
	if err := os.MkdirAll(r.out, 0o755); err != nil {
		return nil, fmt.Errorf("create the packet directory: %w", err)
	}
	for _, f := range files {
		path := filepath.Join(r.out, f.name)
		if err := os.WriteFile(path, f.data, 0o644); err != nil {
			return nil, fmt.Errorf("write the review packet: %w", err)
		}
		fmt.Fprintf(e.stdout, "wrote %s\n", path)
	}
	if jwks == nil {
		fmt.Fprintf(e.stdout, "wrote no %s: the ledger has no signing keys, so no receipt was issued\n", packetJWKSFile)
	}
	fmt.Fprintf(e.stdout, "verdict: %s (%d of %d operations ready)\n", p.Verdict.Status, p.Summary.ReadyOperations, p.Summary.Operations)
	return p, nil
}

// included reads op's receipt as a packet includes it: the latest issued
// version, or the provisional receipt as of now, with the approval op ran
// under.
func included(ctx context.Context, s ledger.Store, op *ledger.Operation, now time.Time) (packet.Included, error) {
	rd, err := issue.Read(ctx, s, op, &receipt.LoadOptions{Now: now})
	if err != nil {
		return packet.Included{}, err
	}
	inc := packet.Included{Receipt: rd.Receipt}
	if v := rd.Latest(); v != nil {
		inc.Document = v.Document
	}
	if op.ApprovalID != 0 {
		if inc.Approval, err = s.ApprovalGet(ctx, op.ApprovalID); err != nil {
			return packet.Included{}, fmt.Errorf("load approval %d of operation %q for the review packet: %w", op.ApprovalID, op.OperationID, err)
		}
	}
	return inc, nil
}

// signPacket signs p with the ledger's active key and renders it as a DSSE
// envelope or, for sigstore-bundle, that envelope in a Sigstore bundle.
func signPacket(ctx context.Context, s ledger.Store, ring *secrets.Ring, p *packet.Packet, format string) ([]byte, error) {
	doc, kid, err := issue.New(s, ring).SignPacket(ctx, p)
	if err != nil {
		return nil, err
	}
	if strings.EqualFold(format, issue.FormatSigstoreBundle) {
		return receipt.Bundle(doc, kid)
	}
	return doc, nil
}

// selectOperations lists every operation sel selects, oldest first, and
// fails when an operation ID it names matches none.
func selectOperations(ctx context.Context, s ledger.Store, sel *packet.Selection) ([]*ledger.Operation, error) {
	p := &ledger.OperationListParams{
		Tenant: sel.Tenant, RunID: sel.RunID, SessionID: sel.SessionID, OperationIDs: sel.OperationIDs,
		CreatedFrom: sel.Since, CreatedBefore: sel.Until, Limit: 200,
	}
	var ops []*ledger.Operation
	for {
		page, err := s.OperationList(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("list the operations for the review packet: %w", err)
		}
		ops = append(ops, page...)
		if len(page) < p.Limit {
			break
		}
		p.BeforeID = page[len(page)-1].ID
	}
	slices.Reverse(ops)
	var missing []string
	for _, id := range sel.OperationIDs {
		if !slices.ContainsFunc(ops, func(op *ledger.Operation) bool { return op.OperationID == id }) && !slices.Contains(missing, id) {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		quoted := make([]string, len(missing))
		for i, id := range missing {
			quoted[i] = strconv.Quote(id)
		}
		rest := *sel
		rest.OperationIDs = nil
		if where := selectionText(&rest); where != "" {
			return nil, fmt.Errorf("no operation %s matches %s; name only operations of the selection", strings.Join(quoted, ", "), where)
		}
		return nil, fmt.Errorf("no operation %s in the ledger; check the operation IDs", strings.Join(quoted, ", "))
	}
	return ops, nil
}

// selectionText names a selection for messages.
func selectionText(sel *packet.Selection) string {
	var parts []string
	if sel.RunID != "" {
		parts = append(parts, fmt.Sprintf("run %q", sel.RunID))
	}
	if sel.SessionID != "" {
		parts = append(parts, fmt.Sprintf("session %q", sel.SessionID))
	}
	if sel.Tenant != "" {
		parts = append(parts, fmt.Sprintf("tenant %q", sel.Tenant))
	}
	if !sel.Since.IsZero() {
		parts = append(parts, "accepted since "+stamp(sel.Since))
	}
	if !sel.Until.IsZero() {
		parts = append(parts, "accepted before "+stamp(sel.Until))
	}
	if len(sel.OperationIDs) > 0 {
		parts = append(parts, fmt.Sprintf("operation IDs %q", strings.Join(sel.OperationIDs, ", ")))
	}
	return strings.Join(parts, ", ")
}

// notReadyText says in one line which operations keep the verdict from
// being ready.
func notReadyText(p *packet.Packet) string {
	names := make([]string, len(p.Verdict.NotReady))
	for i, n := range p.Verdict.NotReady {
		names[i] = fmt.Sprintf("%s (%s)", inert.Terminal(n.OperationID), n.ReviewStatus)
	}
	return fmt.Sprintf("%d of %d operations: %s", len(p.Verdict.NotReady), p.Summary.Operations, strings.Join(names, ", "))
}
