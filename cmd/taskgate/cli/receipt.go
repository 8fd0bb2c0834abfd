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
	"github.com/taskgate/taskgate/ledger/dburl"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/secrets"
	"github.com/taskgate/taskgate/signingkeys"
)

func (e *env) receiptCmd() *cobra.Command {
	var tenant, format, cfgPath string
	cmd := &cobra.Command{
		Use:   "receipt OPERATION_ID|TASK_ID",
		Short: "Print an operation's receipt: attempts, remote jobs, charges, status and next actions",
		Long: "receipt prints an operation's receipt. When the ledger has an active signing key (taskgate\n" +
			"signing-keys create) the receipt is signed with it, which needs the secrets keys that encrypt it:\n" +
			"--config's secrets.key_file, or " + secrets.EnvKeys + ". Without an active key it is printed\n" +
			"unsigned, and stderr says so. taskgate receipt verify checks a signed receipt's JSON rendering.",
		Args: oneArg("the operation ID or task ID", "taskgate receipt settlement-regression-842 --format md"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains([]string{"yaml", "json", "md"}, strings.ToLower(format)) {
				return &usageError{msg: fmt.Sprintf("--format %q is not a receipt format; use yaml, json or md", format), hint: "taskgate receipt " + args[0] + " --format md"}
			}
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
			in, err := receipt.Load(ctx, s, op, nil)
			if err != nil {
				return err
			}
			r := receipt.Build(in)
			signed, err := signingkeys.NewSigner(s, ring).Sign(ctx, r, in.Now)
			if errors.Is(err, signingkeys.ErrNoRing) {
				return noSigningRing(cmd, err)
			}
			if err != nil {
				return err
			}
			out, err := receipt.Render(r, format)
			if err != nil {
				return err
			}
			if _, err := e.stdout.Write(out); err != nil {
				return err
			}
			if !signed {
				fmt.Fprintln(e.stderr, "The receipt is unsigned: the ledger has no active signing key (taskgate signing-keys create).")
			}
			return nil
		},
	}
	operationTenantFlag(cmd, &tenant)
	cmd.Flags().StringVar(&format, "format", "yaml", "yaml, json or md")
	cmd.Flags().StringVar(&cfgPath, "config", "", "the gateway's configuration (its database and the secrets keys that open the signing key)")
	cmd.AddCommand(e.receiptVerifyCmd())
	return cmd
}

func (e *env) receiptVerifyCmd() *cobra.Command {
	var jwks, cfgPath string
	cmd := &cobra.Command{
		Use:   "verify FILE [--jwks FILE|URL]",
		Short: "Check a signed receipt's JSON rendering offline: its signature, its key and every figure",
		Long: "verify checks a receipt's JSON rendering (taskgate receipt ID --format json, or GET\n" +
			"/v1/operations/{id}/receipt?format=json): that it is signed, that the key which signed it is\n" +
			"among the trusted keys, retired ones included, and that the receipt's content is what was signed.\n" +
			"The trusted keys are the JWK Set in --jwks, a file or an http(s) URL such as the gateway's\n" +
			signingkeys.JWKSPath + "; without --jwks, the signing keys of the ledger (--db, or --config's\n" +
			"database). It exits 0 only when every check holds; otherwise it prints what failed, naming the\n" +
			"field that differs from what was signed, the unknown key, or the signature, and exits 1.",
		Example: "  taskgate receipt verify receipt.json --jwks https://gateway.example.com" + signingkeys.JWKSPath + "\n" +
			"  taskgate receipt verify receipt.json --jwks receipt-keys.json",
		Args: oneArg("the receipt's JSON file", "taskgate receipt verify receipt.json --jwks receipt-keys.json"),
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
			v, err := receipt.Verify(doc, keys)
			if err != nil {
				return fmt.Errorf("%s: %w; verify the JSON rendering (taskgate receipt ID --format json)", file, err)
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
			fmt.Fprintf(e.stdout, "  signed:     %s by key %s (%s)\n", v.SignedAt.UTC().Format(time.RFC3339), key, receipt.Algorithm)
			fmt.Fprintf(e.stdout, "  chain head: %s\n", head)
			fmt.Fprintf(e.stdout, "  fields:     %d, each as signed\n", v.Fields)
			return nil
		},
	}
	cmd.Flags().StringVar(&jwks, "jwks", "", "the trusted keys: a JWK Set file or http(s) URL; unset, the ledger's signing keys")
	cmd.Flags().StringVar(&cfgPath, "config", "", "without --jwks, the gateway's configuration whose database holds the signing keys")
	return cmd
}
