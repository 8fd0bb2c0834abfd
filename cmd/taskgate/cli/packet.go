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

// receiptSigning is how the packet command signs the receipts it embeds
// and where it gets the keys that verify them. Embedder nil embeds each
// receipt unsigned; JWKS nil writes no JWKS beside the packet, and the
// packet and the command's output say so.
type receiptSigning struct {
	embedder packet.Embedder
	// jwks returns the JWKS (RFC 7517) holding every key, retired ones too,
	// that the embedded receipts may be signed with.
	jwks func(ctx context.Context) ([]byte, error)
}

// ledgerSigning signs the embedded receipts with the ledger's active
// signing key, and gives the JWKS of all its keys; with no active key it
// is zero, and the receipts are embedded unsigned.
func ledgerSigning(ctx context.Context, s ledger.Store, ring *secrets.Ring, at time.Time) (receiptSigning, error) {
	keys, err := s.SigningKeyList(ctx)
	if err != nil {
		return receiptSigning{}, err
	}
	if signingkeys.Active(keys) == nil {
		return receiptSigning{}, nil
	}
	return receiptSigning{
		embedder: signingkeys.NewSigner(s, ring).Embedder(ctx, at),
		jwks: func(ctx context.Context) ([]byte, error) {
			keys, err := s.SigningKeyList(ctx)
			if err != nil {
				return nil, err
			}
			return signingkeys.JWKS(keys)
		},
	}, nil
}

// packetRequest is what one packet command asks for.
type packetRequest struct {
	sel        packet.Selection
	format     string
	out        string
	allowEmpty bool
	now        time.Time
	signing    receiptSigning
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
			"--format md (GitHub-flavoured Markdown, for a pull-request comment) or json (packet/packet.schema.json)\n" +
			"goes to stdout. --out DIR writes packet.md and packet.json there instead, with jwks.json, the keys\n" +
			"that verify the receipts, when they are signed.\n\n" +
			"Exit status: 0 when the verdict is ready, 2 when it is not (after rendering the packet), 1 when no\n" +
			"packet could be made: bad flags, an unreachable ledger, or nothing selected (unless --allow-empty).",
		Example: "  taskgate packet --run ci-4711 --format md > packet.md\n" +
			"  taskgate packet --run ci-4711 --out review/\n" +
			"  taskgate packet --tenant acme --since 24h --format json\n" +
			"  taskgate packet settlement-regression-842 suite-7 --tenant acme",
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			req.now = time.Now()
			req.sel.OperationIDs = args
			if err := req.parse(cmd, since, until); err != nil {
				return err
			}
			s, ring, _, err := e.signingLedger(cmd, cfgPath)
			if err != nil {
				return err
			}
			defer s.Close()
			if req.signing, err = ledgerSigning(cmd.Context(), s, ring, req.now); err != nil {
				return err
			}
			p, err := e.writePacket(cmd.Context(), s, &req)
			if errors.Is(err, signingkeys.ErrNoRing) {
				return noSigningRing(cmd, err)
			}
			if err == nil && req.signing.embedder == nil {
				fmt.Fprintln(e.stderr, "The receipts are unsigned: the ledger has no active signing key (taskgate signing-keys create).")
			}
			if err != nil {
				return err
			}
			if !p.Ready() {
				fmt.Fprintf(e.stderr, "review packet: not ready: %s\n", notReadyText(p))
				return &exitError{code: exitNotReady}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfgPath, "config", "", "the gateway's configuration (its database and the secrets keys that open the signing key)")
	f.StringVar(&req.sel.RunID, "run", "", "the run ID the client passed as _meta \"dev.taskgate/run-id\"")
	f.StringVar(&req.sel.SessionID, "session", "", "the MCP session the run's calls came on (2025-11-25 sessions)")
	f.StringVar(&req.sel.Tenant, "tenant", "", "only this tenant's operations")
	f.StringVar(&since, "since", "", "only operations accepted at or after this RFC 3339 time, or this long ago (24h)")
	f.StringVar(&until, "until", "", "only operations accepted before this RFC 3339 time, or this long ago")
	f.StringVar(&req.format, "format", "md", "md or json, printed to stdout")
	f.StringVar(&req.out, "out", "", "write packet.md, packet.json and, for signed receipts, jwks.json into this directory instead")
	f.BoolVar(&req.allowEmpty, "allow-empty", false, "render a packet (verdict ready) when nothing matches, instead of failing")
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
	if !slices.Contains([]string{"md", "json"}, strings.ToLower(r.format)) {
		return &usageError{msg: fmt.Sprintf("--format %q is not a review packet format; use md or json", r.format), hint: packetHint}
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

// writePacket gathers the selected operations' receipts from s, builds the
// packet and writes it as r asks: to stdout in r.format, or into r.out.
func (e *env) writePacket(ctx context.Context, s ledger.Store, r *packetRequest) (*packet.Packet, error) {
	ops, err := selectOperations(ctx, s, &r.sel)
	if err != nil {
		return nil, err
	}
	if len(ops) == 0 && !r.allowEmpty {
		return nil, fmt.Errorf("no operations in ledger %s match %s; check the selection, or pass --allow-empty to render an empty packet",
			dburl.Describe(e.db), selectionText(&r.sel))
	}
	in := &packet.Input{Selection: r.sel, Embedder: r.signing.embedder, Now: r.now}
	for _, op := range ops {
		rin, err := receipt.Load(ctx, s, op, &receipt.LoadOptions{Now: r.now})
		if err != nil {
			return nil, err
		}
		in.Operations = append(in.Operations, rin)
	}
	if r.out == "" {
		p, err := packet.Build(in)
		if err != nil {
			return nil, err
		}
		b, err := packet.Render(p, r.format)
		if err != nil {
			return nil, err
		}
		_, err = e.stdout.Write(b)
		return p, err
	}

	if r.signing.jwks != nil {
		in.JWKS = packetJWKSFile
	}
	p, err := packet.Build(in)
	if err != nil {
		return nil, err
	}
	// The keys are read after the receipts are signed, so that a key
	// created meanwhile, which may have signed some, is among them.
	var jwks []byte
	if r.signing.jwks != nil {
		if jwks, err = r.signing.jwks(ctx); err != nil {
			return nil, fmt.Errorf("get the keys that verify the receipts: %w", err)
		}
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
		fmt.Fprintf(e.stdout, "wrote no %s: the receipts are embedded as %s, and no keys to verify them were given\n", packetJWKSFile, p.Verification.ReceiptForm)
	}
	fmt.Fprintf(e.stdout, "verdict: %s (%d of %d operations ready)\n", p.Verdict.Status, p.Summary.ReadyOperations, p.Summary.Operations)
	return p, nil
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
