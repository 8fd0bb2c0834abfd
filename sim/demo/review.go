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
	keyFile   = "taskgate.keys"
	reviewDir = "review"
	jwksFile  = "jwks.json"
	// issuedFile is the operation's receipt as the gateway issued it: a
	// DSSE envelope over its in-toto statement.
	issuedFile = "receipt.dsse.json"
	// signedPacketFile is the review packet signed: a DSSE envelope over
	// an in-toto statement whose subjects are the issued receipts.
	signedPacketFile = "packet.dsse.json"
)

// Review is what the review step showed.
type Review struct {
	// Dir holds packet.md, packet.json, jwks.json, the operation's
	// receipt as the gateway issued it, receipt.dsse.json, and the signed
	// packet, packet.dsse.json.
	Dir string
	// KeyID is the key the receipts and the packet were signed with.
	KeyID string
	// Verdict is the packet's.
	Verdict packet.VerdictStatus
	// Operations counts the packet's operations.
	Operations int
	// Verified reports that the issued receipt and the signed packet,
	// which lists it by digest, verified offline against the packet's
	// JWKS; Problems say what failed otherwise.
	Verified bool
	Problems []string
}

// review writes the review packet for RunID from the issued receipts,
// signs it, and checks the operation's receipt and the signed packet
// offline, from the files alone.
func (r *run) review(ctx context.Context) error {
	r.p.step(7, "The review packet: the run's issued receipts, the packet written and signed, both verified offline")
	dir := filepath.Dir(r.h.ConfigPath)
	ops, err := r.h.Store.OperationList(ctx, &ledger.OperationListParams{Tenant: Tenant, RunID: RunID})
	if err != nil {
		return fmt.Errorf("list the operations of run %s: %w", RunID, err)
	}
	now := time.Now()
	in := &packet.Input{Selection: packet.Selection{RunID: RunID, Tenant: Tenant}, JWKS: jwksFile, Now: now}
	files := map[string][]byte{}
	for _, op := range ops {
		rd, err := issue.Read(ctx, r.h.Store, op, &receipt.LoadOptions{Now: now})
		if err != nil {
			return err
		}
		inc := packet.Included{Receipt: rd.Receipt}
		if v := rd.Latest(); v != nil {
			inc.Document = v.Document
			if op.OperationID == OperationID {
				files[issuedFile] = v.Document
			}
		}
		if op.ApprovalID != 0 {
			if inc.Approval, err = r.h.Store.ApprovalGet(ctx, op.ApprovalID); err != nil {
				return fmt.Errorf("load the approval of %s: %w", op.OperationID, err)
			}
		}
		in.Operations = append(in.Operations, inc)
	}
	p, err := packet.Build(in)
	if err != nil {
		return fmt.Errorf("build the review packet of run %s: %w", RunID, err)
	}
	keys, err := r.h.Store.SigningKeyList(ctx)
	if err != nil {
		return err
	}
	if files[jwksFile], err = signingkeys.JWKS(keys); err != nil {
		return err
	}
	rv := &Review{Dir: filepath.Join(dir, reviewDir), KeyID: r.signingKey.KeyID, Verdict: p.Verdict.Status, Operations: len(p.Operations)}
	r.out.Review = rv
	if files["packet.md"], err = packet.Render(p, "md"); err != nil {
		return err
	}
	if files["packet.json"], err = packet.Render(p, "json"); err != nil {
		return err
	}
	if files[signedPacketFile], _, err = issue.New(r.h.Store, r.ring).SignPacket(ctx, p); err != nil {
		rv.Problems = append(rv.Problems, fmt.Sprintf("the review packet could not be signed: %v", err))
		return nil
	}
	if err := os.MkdirAll(rv.Dir, 0o755); err != nil {
		return fmt.Errorf("create the review directory: %w", err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(rv.Dir, name), b, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	r.p.detail("packet    run %s: %d operation(s), verdict %s: packet.md, packet.json, jwks.json and, signed, %s", RunID, rv.Operations, rv.Verdict, signedPacketFile)
	rv.Problems = append(rv.Problems, verifyReview(ctx, rv.Dir)...)
	rv.Verified = len(rv.Problems) == 0
	if rv.Verified {
		r.p.detail("verified  %s as the gateway issued it, and %s, which lists it by digest, against jwks.json alone", issuedFile, signedPacketFile)
	}
	if r.out.Dir != "" {
		db := r.h.Config.Database
		r.p.detail("again, from the kept directory:")
		r.p.detail("  taskgate --db %s packet --run %s --out %s", db, RunID, rv.Dir)
		r.p.detail("  TASKGATE_SECRETS_KEYS=\"$(cat %s)\" taskgate --db %s packet --run %s --format dsse > %s",
			filepath.Join(dir, keyFile), db, RunID, filepath.Join(rv.Dir, signedPacketFile))
		r.p.detail("  taskgate receipt verify %s --jwks %s", filepath.Join(rv.Dir, issuedFile), filepath.Join(rv.Dir, jwksFile))
		r.p.detail("  taskgate packet verify %s --jwks %s --receipt %s", filepath.Join(rv.Dir, signedPacketFile), filepath.Join(rv.Dir, jwksFile), filepath.Join(rv.Dir, issuedFile))
		r.p.detail("  taskgate --db %s verify", db)
	}
	return nil
}

// verifyReview checks the files in dir as a reviewer would, with nothing
// but them: the issued receipt against jwks.json, and the signed packet
// against jwks.json and that receipt. It returns what failed.
func verifyReview(ctx context.Context, dir string) []string {
	read := func(name string) []byte {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		return b
	}
	issued, jwks, signed := read(issuedFile), read(jwksFile), read(signedPacketFile)
	if issued == nil {
		return []string{fmt.Sprintf("the gateway issued no receipt of %s", OperationID)}
	}
	pub, err := signingkeys.ParseJWKS(jwks, jwksFile)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	iv, err := receipt.VerifyEnvelope(ctx, issued, pub)
	if err != nil {
		return []string{fmt.Sprintf("the issued receipt could not be verified: %v", err)}
	}
	for _, pr := range iv.Problems {
		problems = append(problems, pr.Message)
	}
	pv, att, err := receipt.VerifyAttestation(ctx, signed, packet.PredicateType, packet.DocumentKey, "the review packet", pub)
	if err != nil {
		return append(problems, fmt.Sprintf("the signed packet could not be verified: %v", err))
	}
	for _, pr := range pv.Problems {
		problems = append(problems, pr.Message)
	}
	r, err := receipt.Issued(issued, "")
	if err != nil {
		return append(problems, err.Error())
	}
	have := map[string]string{packet.SubjectName(r.Tenant, r.OperationID, r.Issue.Version): receipt.Digest(issued)}
	for _, pr := range packet.CheckReceipts(att.Subjects, have) {
		problems = append(problems, pr.Message)
	}
	return problems
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
		problems = append(problems, "the issued receipt and the signed packet did not verify offline against the packet's JWKS")
	}
	for _, p := range rv.Problems {
		problems = append(problems, "review: "+p)
	}
	return problems
}
