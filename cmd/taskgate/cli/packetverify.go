package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/taskgate/taskgate/internal/inert"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/dburl"
	"github.com/taskgate/taskgate/packet"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/signingkeys"
)

func (e *env) packetVerifyCmd() *cobra.Command {
	var (
		jwks, cfgPath string
		receipts      []string
	)
	cmd := &cobra.Command{
		Use:   "verify FILE [--jwks FILE|URL] [--receipt FILE]...",
		Short: "Check a signed review packet offline: its signature, every field, and that its receipts are the ones it lists",
		Long: "verify checks a signed review packet (taskgate packet --format dsse, or sigstore-bundle): that the key\n" +
			"which signed it is among the trusted keys, that its content is what was signed (naming the field that\n" +
			"differs otherwise), and that each receipt it lists is the one it names: the SHA-256 of the receipt's\n" +
			"DSSE envelope must be the digest the packet lists for it.\n" +
			"The receipts are the files given with --receipt (taskgate receipt ID --format dsse), each checked as\n" +
			"taskgate receipt verify checks it; without --receipt, the versions the ledger stores (--db, or\n" +
			"--config's database). The trusted keys are the JWK Set in --jwks, a file or an http(s) URL; without\n" +
			"it, the ledger's signing keys. It exits 0 only when every check holds; otherwise it prints what\n" +
			"failed, naming the receipt that is not the one listed, and exits 1.",
		Example: "  taskgate packet verify packet.dsse.json --jwks review/jwks.json --db sqlite:taskgate.db\n" +
			"  taskgate packet verify packet.dsse.json --jwks review/jwks.json --receipt receipt.dsse.json",
		Args: oneArg("the signed packet's file", "taskgate packet verify packet.dsse.json --jwks jwks.json"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			file := args[0]
			doc, err := os.ReadFile(file)
			if err != nil {
				return fmt.Errorf("read the signed packet: %w", err)
			}
			var store ledger.Store
			openStore := func() (ledger.Store, error) {
				if store == nil {
					if store, err = e.receiptLedger(cmd, cfgPath); err != nil {
						return nil, err
					}
				}
				return store, nil
			}
			defer func() {
				if store != nil {
					store.Close()
				}
			}()
			keys, source, err := e.packetKeys(ctx, jwks, openStore)
			if err != nil {
				return err
			}
			form := "a DSSE envelope"
			if receipt.IsBundle(doc) {
				form += " in a Sigstore bundle"
				if doc, err = receipt.Unbundle(doc); err != nil {
					return fmt.Errorf("%s: %w", file, err)
				}
			}
			v, att, err := receipt.VerifyAttestation(ctx, doc, packet.PredicateType, packet.DocumentKey, "the review packet", keys)
			if err != nil {
				return fmt.Errorf("%s: %w; verify a signed review packet (taskgate packet --format dsse or sigstore-bundle)", file, err)
			}
			var body struct {
				Verdict    packet.Verdict     `json:"verdict"`
				Operations []packet.Operation `json:"operations"`
			}
			if err := json.Unmarshal(att.Predicate[packet.DocumentKey], &body); err != nil {
				return fmt.Errorf("%s: the statement's predicate holds no readable %s: %w", file, packet.DocumentKey, err)
			}
			problems := v.Problems
			var have map[string]string
			from := "as the ledger stores them"
			if len(receipts) > 0 {
				from = "as given"
				have, problems, err = givenReceipts(ctx, receipts, keys, problems)
			} else {
				var s ledger.Store
				if s, err = openStore(); err == nil {
					have, err = storedReceipts(ctx, s, body.Operations)
				}
			}
			if err != nil {
				return err
			}
			problems = append(problems, packet.CheckReceipts(att.Subjects, have)...)
			if len(problems) > 0 {
				fmt.Fprintf(e.stderr, "Error: %s does not verify against %s:\n", file, source)
				for _, p := range problems {
					fmt.Fprintf(e.stderr, "  %s\n", inert.Terminal(p.Message))
				}
				return &exitError{code: 1}
			}
			fmt.Fprintf(e.stdout, "%s: verified against %s\n", file, source)
			fmt.Fprintf(e.stdout, "  packet:     an in-toto statement (%s) in %s, verdict %s\n", packet.PredicateType, form, inert.Terminal(string(body.Verdict.Status)))
			fmt.Fprintf(e.stdout, "  signed:     by key %s (%s)\n", v.KeyID, v.Algorithm)
			fmt.Fprintf(e.stdout, "  receipts:   %d issued, each the one listed, %s\n", len(att.Subjects), from)
			if n := len(body.Operations) - len(att.Subjects); n > 0 {
				fmt.Fprintf(e.stdout, "  provisional: %d, not issued and not listed\n", n)
			}
			fmt.Fprintf(e.stdout, "  fields:     %d, each as signed\n", v.Fields)
			return nil
		},
	}
	cmd.Flags().StringVar(&jwks, "jwks", "", "the trusted keys: a JWK Set file or http(s) URL; unset, the ledger's signing keys")
	cmd.Flags().StringArrayVar(&receipts, "receipt", nil, "an issued receipt the packet lists, as its DSSE envelope (repeat it); unset, the ledger's stored receipts")
	cmd.Flags().StringVar(&cfgPath, "config", "", "the gateway's configuration whose database holds the receipts or the signing keys")
	return cmd
}

// packetKeys returns the keys a signed packet is checked against: the JWK
// Set at jwks, or the signing keys of the ledger open gives; and names
// them.
func (e *env) packetKeys(ctx context.Context, jwks string, open func() (ledger.Store, error)) (receipt.PublicKeys, string, error) {
	if jwks != "" {
		keys, err := signingkeys.LoadJWKS(ctx, jwks, nil)
		return keys, jwks, err
	}
	s, err := open()
	if err != nil {
		return nil, "", err
	}
	list, err := s.SigningKeyList(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("list the receipt-signing keys: %w", err)
	}
	return signingkeys.PublicKeys(list), "the signing keys of ledger " + dburl.Describe(e.db), nil
}

// givenReceipts reads the issued receipts in files, checks each with keys
// (adding what fails to problems) and returns each one's digest by the
// name a signed packet lists it under.
func givenReceipts(ctx context.Context, files []string, keys receipt.PublicKeys, problems []receipt.Problem) (map[string]string, []receipt.Problem, error) {
	have := map[string]string{}
	for _, f := range files {
		doc, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, fmt.Errorf("read the receipt: %w", err)
		}
		if receipt.IsBundle(doc) {
			return nil, nil, fmt.Errorf("%s is a Sigstore bundle, which holds the receipt's envelope re-encoded; give the envelope the packet lists by digest (taskgate receipt ID --format dsse)", f)
		}
		r, err := receipt.Issued(doc, "")
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w; give an issued receipt (taskgate receipt ID --format dsse)", f, err)
		}
		v, err := receipt.VerifyEnvelope(ctx, doc, keys)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, p := range v.Problems {
			p.Message = f + ": " + p.Message
			problems = append(problems, p)
		}
		have[packet.SubjectName(r.Tenant, r.OperationID, r.Issue.Version)] = receipt.Digest(doc)
	}
	return have, problems, nil
}

// storedReceipts returns the digest of each issued receipt ops name, as
// the ledger stores it, by the name a signed packet lists it under; one
// the ledger does not hold is left out.
func storedReceipts(ctx context.Context, s ledger.Store, ops []packet.Operation) (map[string]string, error) {
	have := map[string]string{}
	for _, o := range ops {
		if o.Provisional {
			continue
		}
		op, err := s.OperationGet(ctx, &ledger.OperationGetParams{Tenant: o.Tenant, OperationID: o.OperationID})
		if errors.Is(err, ledger.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read operation %q: %w", o.OperationID, err)
		}
		versions, err := s.ReceiptVersions(ctx, op.ID)
		if err != nil {
			return nil, fmt.Errorf("read the issued receipts of operation %q: %w", o.OperationID, err)
		}
		for _, v := range versions {
			if v.Version == o.ReceiptVersion {
				have[packet.SubjectName(o.Tenant, o.OperationID, v.Version)] = receipt.Digest(v.Document)
			}
		}
	}
	return have, nil
}
