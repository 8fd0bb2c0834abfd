package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/packet"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/receipt/issue"
	"github.com/taskgate/taskgate/secrets"
	"github.com/taskgate/taskgate/signingkeys"
)

// RunID names the demo's run: the agent passes it with every call, and the
// review packet covers the operations it reached.
const RunID = "taskgate-demo"

// The files the review step writes into its directory.
const (
	keyFile     = "taskgate.keys"
	reviewDir   = "review"
	receiptFile = "receipt.json"
	// issuedFile is the operation's receipt as the gateway issued it: a
	// DSSE envelope over its in-toto statement.
	issuedFile = "receipt.dsse.json"
)

// Review is what the review step showed.
type Review struct {
	// Dir holds packet.md, packet.json, jwks.json, the operation's
	// receipt as the packet signs it, receipt.json, and as the gateway
	// issued it, receipt.dsse.json.
	Dir string
	// KeyID is the key the receipts were signed with.
	KeyID string
	// Verdict is the packet's.
	Verdict packet.VerdictStatus
	// Operations counts the packet's operations.
	Operations int
	// Verified reports that the receipt in the packet verified offline
	// against the packet's JWKS; Problems say what failed otherwise.
	Verified bool
	Problems []string
}

// review signs the run's receipts, writes the review packet for RunID and
// checks the operation's signed receipt offline, from the files alone.
func (r *run) review(ctx context.Context) error {
	r.p.step(7, "The review packet: the run's receipts signed, the packet written, a receipt verified offline")
	dir := filepath.Dir(r.h.ConfigPath)
	ring, key := r.ring, r.signingKey
	ops, err := r.h.Store.OperationList(ctx, &ledger.OperationListParams{Tenant: Tenant, RunID: RunID})
	if err != nil {
		return fmt.Errorf("list the operations of run %s: %w", RunID, err)
	}
	now := time.Now()
	in := &packet.Input{
		Selection: packet.Selection{RunID: RunID, Tenant: Tenant},
		Embedder:  signingkeys.NewSigner(r.h.Store, ring).Embedder(ctx, now),
		JWKS:      "jwks.json", Now: now,
	}
	for _, op := range ops {
		rin, err := receipt.Load(ctx, r.h.Store, op, &receipt.LoadOptions{Now: now})
		if err != nil {
			return err
		}
		in.Operations = append(in.Operations, rin)
	}
	p, err := packet.Build(in)
	if err != nil {
		return fmt.Errorf("build the review packet of run %s: %w", RunID, err)
	}
	keys, err := r.h.Store.SigningKeyList(ctx)
	if err != nil {
		return err
	}
	jwks, err := signingkeys.JWKS(keys)
	if err != nil {
		return err
	}
	rv := &Review{Dir: filepath.Join(dir, reviewDir), KeyID: key.KeyID, Verdict: p.Verdict.Status, Operations: len(p.Operations)}
	r.out.Review = rv
	md, err := packet.Render(p, "md")
	if err != nil {
		return err
	}
	js, err := packet.Render(p, "json")
	if err != nil {
		return err
	}
	files := map[string][]byte{"packet.md": md, "packet.json": js, "jwks.json": jwks}
	for _, o := range p.Operations {
		if o.OperationID == OperationID {
			files[receiptFile] = o.Receipt
		}
	}
	for _, op := range ops {
		if op.OperationID != OperationID {
			continue
		}
		rd, err := issue.Read(ctx, r.h.Store, op, nil)
		if err != nil {
			return err
		}
		if v := rd.Latest(); v != nil {
			files[issuedFile] = v.Document
		}
	}
	if err := os.MkdirAll(rv.Dir, 0o755); err != nil {
		return fmt.Errorf("create the review directory: %w", err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(rv.Dir, name), b, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	r.p.detail("packet    run %s: %d operation(s), verdict %s: packet.md, packet.json and jwks.json", RunID, rv.Operations, rv.Verdict)

	// Offline: the receipt file and the JWKS file, nothing else.
	doc, err := os.ReadFile(filepath.Join(rv.Dir, receiptFile))
	if err != nil {
		rv.Problems = append(rv.Problems, fmt.Sprintf("the packet holds no receipt of %s", OperationID))
		return nil
	}
	jwksFile, err := os.ReadFile(filepath.Join(rv.Dir, "jwks.json"))
	if err != nil {
		return err
	}
	pub, err := signingkeys.ParseJWKS(jwksFile, "jwks.json")
	if err != nil {
		return err
	}
	v, err := receipt.Verify(doc, pub)
	if err != nil {
		rv.Problems = append(rv.Problems, fmt.Sprintf("the receipt could not be verified: %v", err))
		return nil
	}
	rv.Verified = v.OK()
	for _, pr := range v.Problems {
		rv.Problems = append(rv.Problems, pr.Message)
	}
	if rv.Verified {
		r.p.detail("verified  %s against jwks.json alone: the signature, the key and every figure hold", receiptFile)
	}
	// The issued receipt, from its file and the JWKS alone.
	issued, err := os.ReadFile(filepath.Join(rv.Dir, issuedFile))
	if err != nil {
		rv.Verified = false
		rv.Problems = append(rv.Problems, fmt.Sprintf("the gateway issued no receipt of %s", OperationID))
		return nil
	}
	iv, err := receipt.VerifyEnvelope(ctx, issued, pub)
	if err != nil {
		rv.Verified = false
		rv.Problems = append(rv.Problems, fmt.Sprintf("the issued receipt could not be verified: %v", err))
		return nil
	}
	rv.Verified = rv.Verified && iv.OK()
	for _, pr := range iv.Problems {
		rv.Problems = append(rv.Problems, pr.Message)
	}
	if iv.OK() {
		r.p.detail("verified  %s, version %d as the gateway issued it, against jwks.json alone", issuedFile, iv.Version)
	}
	if r.out.Dir != "" {
		db := r.h.Config.Database
		r.p.detail("again, from the kept directory:")
		r.p.detail("  TASKGATE_SECRETS_KEYS=\"$(cat %s)\" taskgate --db %s packet --run %s --out %s",
			filepath.Join(dir, keyFile), db, RunID, rv.Dir)
		r.p.detail("  taskgate receipt verify %s --jwks %s", filepath.Join(rv.Dir, receiptFile), filepath.Join(rv.Dir, "jwks.json"))
		r.p.detail("  taskgate receipt verify %s --jwks %s", filepath.Join(rv.Dir, issuedFile), filepath.Join(rv.Dir, "jwks.json"))
		r.p.detail("  taskgate --db %s verify", db)
	}
	return nil
}

// signingRing creates the secrets key that seals the demo's signing key,
// in dir.
func (r *run) signingRing(dir string) (*secrets.Ring, error) {
	path := filepath.Join(dir, keyFile)
	if _, err := secrets.CreateFile(path); err != nil {
		return nil, fmt.Errorf("create the demo's secrets key: %w", err)
	}
	return secrets.LoadFile(path)
}

// reviewProblems is what the review step must show: a ready packet of the
// run's one operation whose receipt verifies offline.
func reviewProblems(rv *Review) []string {
	if rv == nil {
		return []string{"no review packet was written"}
	}
	var problems []string
	if rv.Verdict != packet.VerdictReady || rv.Operations != 1 {
		problems = append(problems, fmt.Sprintf("the review packet of run %s holds %d operation(s) with verdict %s, want 1, ready", RunID, rv.Operations, rv.Verdict))
	}
	if !rv.Verified {
		problems = append(problems, "the signed receipt did not verify offline against the packet's JWKS")
	}
	for _, p := range rv.Problems {
		problems = append(problems, "receipt verify: "+p)
	}
	return problems
}
