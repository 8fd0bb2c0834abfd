package cli

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskgate/taskgate/internal/inert"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/dburl"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/receipt/issue"
	"github.com/taskgate/taskgate/secrets"
	"github.com/taskgate/taskgate/signingkeys"
)

func (e *env) receiptCmd() *cobra.Command {
	var tenant, format, cfgPath, archiveDir string
	cmd := &cobra.Command{
		Use:   "receipt OPERATION_ID|TASK_ID",
		Short: "Print an operation's receipt: attempts, remote jobs, charges, status and next actions",
		Long: "receipt prints an operation's receipt as the gateway issued it. The gateway issues a receipt once,\n" +
			"when reconciliation reaches a final assessment (complete, or waiting for review): an in-toto\n" +
			"statement signed with the active signing key in a DSSE envelope, stored in the ledger; a later fact\n" +
			"that changes it issues the next version, naming the one before by digest. Reading needs no key:\n" +
			"--format dsse prints the stored envelope byte for byte, sigstore-bundle the same envelope in a Sigstore\n" +
			"bundle v0.3 naming the key that signed it (for cosign verify-blob-attestation --bundle), yaml, json\n" +
			"and md render what it says.\n" +
			"An operation whose receipt is not issued yet gets a provisional receipt, built from the ledger and\n" +
			"unsigned, and stderr says so. taskgate receipt verify checks an issued receipt offline.\n" +
			"With --archive DIR it reads an archived operation's issued receipt from the archive, byte for byte\n" +
			"as it was stored, and opens no ledger.",
		Example: "  taskgate receipt settlement-regression-842 --format md\n" +
			"  taskgate receipt settlement-regression-842 --format dsse > receipt.dsse.json\n" +
			"  taskgate receipt settlement-regression-842 --format sigstore-bundle > receipt.sigstore.json",
		Args: oneArg("the operation ID or task ID", "taskgate receipt settlement-regression-842 --format md"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(issue.Formats, strings.ToLower(format)) {
				return &usageError{msg: fmt.Sprintf("--format %q is not a receipt format; use yaml, json, md, dsse or sigstore-bundle", format), hint: "taskgate receipt " + args[0] + " --format md"}
			}
			if archiveDir != "" {
				return e.archivedReceipt(archiveDir, tenant, args[0], format)
			}
			ctx := cmd.Context()
			s, err := e.receiptLedger(cmd, cfgPath)
			if err != nil {
				return err
			}
			defer s.Close()
			op, err := findOperation(ctx, s, tenant, args[0])
			if err != nil {
				return err
			}
			rd, err := issue.Read(ctx, s, op, nil)
			if err != nil {
				return err
			}
			out, err := rd.Render(format)
			if err != nil {
				return err
			}
			if _, err := e.stdout.Write(out); err != nil {
				return err
			}
			if rd.Latest() == nil {
				fmt.Fprintln(e.stderr, "The receipt is provisional: it is not issued yet (the operation is still open, or no signing key could sign it when it was final; taskgate receipt issue signs it).")
			}
			return nil
		},
	}
	operationTenantFlag(cmd, &tenant)
	cmd.Flags().StringVar(&format, "format", "yaml", "yaml, json, md, dsse (the issued envelope as stored) or sigstore-bundle (that envelope in a Sigstore bundle)")
	cmd.Flags().StringVar(&cfgPath, "config", "", "the gateway's configuration, for its database")
	cmd.Flags().StringVar(&archiveDir, "archive", "", "read the operation from the archive in this directory (taskgate archive) instead of the ledger")
	cmd.AddCommand(e.receiptVerifyCmd(), e.receiptIssueCmd())
	return cmd
}

// receiptLedger opens the ledger --config names, or --db's: reading a
// receipt needs no secrets key.
func (e *env) receiptLedger(cmd *cobra.Command, cfgPath string) (ledger.Store, error) {
	db := e.db
	if cfgPath != "" {
		cfg, err := e.loadConfig(cmd, cfgPath)
		if err != nil {
			return nil, err
		}
		db = cfg.Database
	}
	return e.openLedger(cmd.Context(), db)
}

func (e *env) receiptIssueCmd() *cobra.Command {
	var tenant, cfgPath string
	cmd := &cobra.Command{
		Use:   "issue OPERATION_ID|TASK_ID",
		Short: "Issue an operation's final receipt now, or its next version if the ledger changed it",
		Long: "issue does what the gateway's reconciler does when an operation's assessment is final: it signs\n" +
			"the receipt with the active signing key and stores it, once; when the ledger has changed what the\n" +
			"latest version says, it issues the next version. Use it for an operation that ended while the ledger\n" +
			"had no signing key. It needs the secrets keys that encrypt the key: --config's secrets.key_file,\n" +
			"or " + secrets.EnvKeys + ".",
		Args: oneArg("the operation ID or task ID", "taskgate receipt issue settlement-regression-842 --config taskgate.yaml"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			s, ring, _, err := e.signingLedger(cmd, cfgPath)
			if err != nil {
				return err
			}
			defer s.Close()
			op, err := findOperation(ctx, s, tenant, args[0])
			if err != nil {
				return err
			}
			res, err := issue.New(s, ring).Issue(ctx, op, nil)
			if errors.Is(err, signingkeys.ErrNoRing) {
				return noSigningRing(cmd, err)
			}
			if err != nil {
				return err
			}
			switch res.Outcome {
			case issue.Issued:
				fmt.Fprintf(e.stdout, "issued version %d of the receipt of %s, sha256 %s, signed by key %s\n", res.Version.Version, inert.Terminal(op.OperationID), res.Version.Digest, res.Version.KeyID)
			case issue.Unchanged:
				fmt.Fprintf(e.stdout, "version %d of the receipt of %s says what the ledger says; nothing issued\n", res.Version.Version, inert.Terminal(op.OperationID))
			case issue.Open:
				return fmt.Errorf("the receipt of %s is not final yet: the operation is still open and reconciling; it is issued when reconciliation completes or the operation waits for review", inert.Terminal(op.OperationID))
			case issue.NoKey:
				return &usageError{msg: "the ledger has no active signing key, so nothing can sign the receipt", hint: "taskgate signing-keys create --config taskgate.yaml"}
			}
			return nil
		},
	}
	operationTenantFlag(cmd, &tenant)
	cmd.Flags().StringVar(&cfgPath, "config", "", "the gateway's configuration (its database and the secrets keys that open the signing key)")
	return cmd
}

func (e *env) receiptVerifyCmd() *cobra.Command {
	var jwks, cfgPath string
	cmd := &cobra.Command{
		Use:   "verify FILE [--jwks FILE|URL]",
		Short: "Check an issued receipt offline: its signature, its key and every figure",
		Long: "verify checks an issued receipt (taskgate receipt ID --format dsse, a DSSE envelope over an in-toto\n" +
			"statement, or --format sigstore-bundle, that envelope in a Sigstore bundle) or a receipt's JSON\n" +
			"rendering signed with a detached JWS, as receipts were signed before they were issued: that it is\n" +
			"signed, that the key which signed it is among the trusted keys, retired ones included, and that the receipt's content is what was signed.\n" +
			"The trusted keys are the JWK Set in --jwks, a file or an http(s) URL such as the gateway's\n" +
			signingkeys.JWKSPath + "; without --jwks, the signing keys of the ledger (--db, or --config's\n" +
			"database). It exits 0 only when every check holds; otherwise it prints what failed, naming the\n" +
			"field that differs from what was signed, the unknown key, or the signature, and exits 1.",
		Example: "  taskgate receipt verify receipt.dsse.json --jwks https://gateway.example.com" + signingkeys.JWKSPath + "\n" +
			"  taskgate receipt verify receipt.dsse.json --jwks receipt-keys.json",
		Args: oneArg("the receipt's file", "taskgate receipt verify receipt.dsse.json --jwks receipt-keys.json"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if jwks != "" && cfgPath != "" {
				return &usageError{msg: "--config names a ledger whose keys to trust, --jwks a key set; give one", hint: "taskgate receipt verify " + args[0] + " --jwks receipt-keys.json"}
			}
			ctx := cmd.Context()
			file := args[0]
			doc, err := os.ReadFile(file)
			if err != nil {
				return fmt.Errorf("read the receipt: %w", err)
			}
			var (
				keys    receipt.PublicKeys
				retired = map[string]time.Time{}
				source  = jwks
			)
			if jwks != "" {
				if keys, err = signingkeys.LoadJWKS(ctx, jwks, nil); err != nil {
					return err
				}
			} else {
				store, _, db, err := e.signingLedger(cmd, cfgPath)
				if err != nil {
					return err
				}
				defer store.Close()
				list, err := store.SigningKeyList(ctx)
				if err != nil {
					return fmt.Errorf("list the receipt-signing keys: %w", err)
				}
				keys = signingkeys.PublicKeys(list)
				for _, k := range list {
					if !k.RetiredAt.IsZero() {
						retired[k.KeyID] = k.RetiredAt
					}
				}
				source = "the signing keys of ledger " + dburl.Describe(db)
			}
			var v *receipt.Verification
			switch {
			case receipt.IsBundle(doc):
				v, err = receipt.VerifyBundle(ctx, doc, keys)
			case receipt.IsEnvelope(doc):
				v, err = receipt.VerifyEnvelope(ctx, doc, keys)
			default:
				v, err = receipt.Verify(doc, keys)
			}
			if err != nil {
				return fmt.Errorf("%s: %w; verify an issued receipt (taskgate receipt ID --format dsse or sigstore-bundle) or a receipt's signed JSON rendering", file, err)
			}
			if !v.OK() {
				fmt.Fprintf(e.stderr, "Error: %s does not verify against %s:\n", file, source)
				for _, p := range v.Problems {
					fmt.Fprintf(e.stderr, "  %s\n", p.Message)
				}
				return &exitError{code: 1}
			}
			key := v.KeyID
			if at, ok := retired[v.KeyID]; ok {
				key += ", retired " + at.UTC().Format(time.RFC3339)
			}
			head := v.ChainHead
			if head == "" {
				head = "none recorded"
			}
			fmt.Fprintf(e.stdout, "%s: verified against %s\n", file, source)
			fmt.Fprintf(e.stdout, "  operation:  %s\n", inert.Terminal(v.OperationID))
			if v.Form != receipt.FormJWS {
				in := "a DSSE envelope"
				if v.Form == receipt.FormBundle {
					in += " in a Sigstore bundle"
				}
				fmt.Fprintf(e.stdout, "  issued:     version %d, an in-toto statement (%s) in %s\n", v.Version, receipt.PredicateType, in)
				if v.Previous != "" {
					fmt.Fprintf(e.stdout, "  replaces:   version %d, sha256 %s\n", v.Version-1, inert.Terminal(v.Previous))
				}
				fmt.Fprintf(e.stdout, "  signed:     by key %s (%s)\n", key, v.Algorithm)
			} else {
				fmt.Fprintf(e.stdout, "  signed:     %s by key %s (%s)\n", v.SignedAt.UTC().Format(time.RFC3339), key, v.Algorithm)
			}
			fmt.Fprintf(e.stdout, "  chain head: %s\n", head)
			fmt.Fprintf(e.stdout, "  fields:     %d, each as signed\n", v.Fields)
			return nil
		},
	}
	cmd.Flags().StringVar(&jwks, "jwks", "", "the trusted keys: a JWK Set file or http(s) URL; unset, the ledger's signing keys")
	cmd.Flags().StringVar(&cfgPath, "config", "", "without --jwks, the gateway's configuration whose database holds the signing keys")
	return cmd
}
