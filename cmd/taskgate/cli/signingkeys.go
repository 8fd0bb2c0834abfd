package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/dburl"
	"github.com/taskgate/taskgate/secrets"
	"github.com/taskgate/taskgate/signingkeys"
)

// signingLedger opens the ledger and the secrets key ring that seals its
// receipt-signing keys: with --config, the configuration's database
// (unless --db or TASKGATE_DB names another) and its secrets keys;
// without, --db and the keys in TASKGATE_SECRETS_KEYS. The ring is nil
// when no key is configured. It returns the ledger's --db value too.
func (e *env) signingLedger(cmd *cobra.Command, cfgPath string) (ledger.Store, *secrets.Ring, string, error) {
	ctx := cmd.Context()
	db := e.db
	var ring *secrets.Ring
	if cfgPath != "" {
		cfg, err := e.loadConfig(cmd, cfgPath)
		if err != nil {
			return nil, nil, "", err
		}
		if ring, err = e.secretsRing(cfg); err != nil {
			return nil, nil, "", err
		}
		db = cfg.Database
	} else {
		var err error
		if ring, err = secrets.Load("", e.getenv(secrets.EnvKeys)); err != nil {
			return nil, nil, "", err
		}
	}
	store, err := e.openLedgerWith(ctx, db, ring)
	if err != nil {
		return nil, nil, "", err
	}
	return store, ring, db, nil
}

// noSigningRing is the usage error of a command that must seal or open a
// signing key without a secrets key.
func noSigningRing(cmd *cobra.Command, err error) error {
	return &usageError{msg: oneLine(err.Error()), hint: cmd.CommandPath() + " --config taskgate.yaml (its secrets.key_file; see taskgate secrets-key create)"}
}

func (e *env) signingKeysCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "signing-keys",
		Short: "Create, list and retire the Ed25519 or ECDSA P-256 keys that sign receipts",
		Long: "The gateway issues each final receipt signed with the newest active signing key: an in-toto\n" +
			"statement over the receipt and its chain head in a DSSE envelope (Ed25519 or ECDSA P-256). Without an active key\n" +
			"final receipts stay provisional and unsigned.\n" +
			"Keys live in the ledger; the private part is encrypted with the secrets keys (secrets.key_file, or\n" +
			secrets.EnvKeys + "), the one mechanism for the gateway's data keys, and erased when a key is retired.\n" +
			"Public keys, retired ones too, are served at " + signingkeys.JWKSPath + " and printed by list --jwks,\n" +
			"so that taskgate receipt verify can check a receipt offline.",
	}
	cmd.AddCommand(e.signingKeysCreateCmd(), e.signingKeysListCmd(), e.signingKeysRetireCmd())
	group(cmd)
	return cmd
}

func (e *env) signingKeysCreateCmd() *cobra.Command {
	var cfgPath, algorithm string
	cmd := &cobra.Command{
		Use:   "create [--algorithm ed25519|ecdsa-p256] [--config taskgate.yaml]",
		Short: "Create a receipt-signing key; it signs every receipt from now on",
		Long: "create makes a new key from the operating system's randomness, encrypts its private part with\n" +
			"the newest secrets key and records it in the ledger. --algorithm picks the kind: ed25519 (the\n" +
			"default; EdDSA) or ecdsa-p256 (ES256, ECDSA over P-256 with SHA-256, cosign's default algorithm).\n" +
			"From then on every gateway on the ledger signs receipts with it. It prints the key's ID (kid), the RFC 7638 thumbprint of its public key.\n" +
			"Older keys stay active until retired; only the newest signs.",
		Example: "  taskgate signing-keys create --config taskgate.yaml\n" +
			"  taskgate signing-keys create --algorithm ecdsa-p256 --config taskgate.yaml\n" +
			"  TASKGATE_SECRETS_KEYS=\"$(cat taskgate.keys)\" taskgate signing-keys create --db sqlite:taskgate.db",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			alg, err := signingkeys.ParseAlgorithm(algorithm)
			if err != nil {
				return &usageError{msg: err.Error(), hint: "taskgate signing-keys create --algorithm ecdsa-p256"}
			}
			store, ring, db, err := e.signingLedger(cmd, cfgPath)
			if err != nil {
				return err
			}
			defer store.Close()
			ctx := cmd.Context()
			k, err := signingkeys.CreateWith(ctx, store, ring, alg, time.Time{})
			if errors.Is(err, signingkeys.ErrNoRing) {
				return noSigningRing(cmd, err)
			}
			if err != nil {
				return err
			}
			fmt.Fprintln(e.stdout, k.KeyID)
			fmt.Fprintf(e.stderr, "Created receipt-signing key %s (%s) in ledger %s, its private part encrypted with secrets key %s. Receipts are signed with it from now on.\n",
				k.KeyID, k.Algorithm, dburl.Describe(db), signingkeys.SealedWith(k))
			return e.hintOlderActive(ctx, store, k.KeyID)
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "the gateway's configuration (its database and secrets keys)")
	cmd.Flags().StringVar(&algorithm, "algorithm", signingkeys.Algorithms[0], "the key's algorithm: "+strings.Join(signingkeys.Algorithms, " or "))
	return cmd
}

// hintOlderActive names the active keys other than the one that signs:
// they sign nothing, and retiring them erases their private parts.
func (e *env) hintOlderActive(ctx context.Context, store ledger.Store, signing string) error {
	keys, err := store.SigningKeyList(ctx)
	if err != nil {
		return fmt.Errorf("list the receipt-signing keys: %w", err)
	}
	for _, k := range keys {
		if k.Active() && k.KeyID != signing {
			fmt.Fprintf(e.stderr, "Key %s is still active but signs nothing; retire it with taskgate signing-keys retire %s\n", k.KeyID, positional(k.KeyID))
		}
	}
	return nil
}

// signingKeyView is a signing key as list prints it in JSON: its public
// part and state, never its private part, not even sealed.
type signingKeyView struct {
	KeyID      string    `json:"kid"`
	Algorithm  string    `json:"alg"`
	Status     string    `json:"status"`
	Signs      bool      `json:"signs"`
	SealedWith string    `json:"sealed_with,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	RetiredAt  time.Time `json:"retired_at,omitzero"`
}

func (e *env) signingKeysListCmd() *cobra.Command {
	var (
		cfgPath      string
		asJSON, jwks bool
		asPEM        bool
		kid          string
	)
	cmd := &cobra.Command{
		Use:   "list [--json | --jwks | --pem [--kid KID]] [--config taskgate.yaml]",
		Short: "List the receipt-signing keys, retired ones too; --jwks prints their public keys as a JWK Set",
		Long: "list shows each key's ID, whether it is active or retired, which one signs and which secrets key\n" +
			"encrypts its private part. --jwks prints the public keys, retired ones included, as the JWK Set the\n" +
			"gateway serves at " + signingkeys.JWKSPath + ": give that file to taskgate receipt verify --jwks.\n" +
			"--pem prints them as PEM public keys (--kid: that key alone), for cosign verify-blob-attestation --key\n" +
			"(see docs/receipts.md).",
		Example: "  taskgate signing-keys list\n  taskgate signing-keys list --jwks > receipt-keys.json\n" +
			"  taskgate signing-keys list --pem --kid KID > receipt-key.pem",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if n := btoi(asJSON) + btoi(jwks) + btoi(asPEM); n > 1 {
				return &usageError{msg: "--json, --jwks and --pem are renderings; give one", hint: "taskgate signing-keys list --jwks"}
			}
			if kid != "" && !asPEM {
				return &usageError{msg: "--kid picks the key --pem prints", hint: "taskgate signing-keys list --pem --kid " + kid}
			}
			store, _, _, err := e.signingLedger(cmd, cfgPath)
			if err != nil {
				return err
			}
			defer store.Close()
			keys, err := store.SigningKeyList(cmd.Context())
			if err != nil {
				return fmt.Errorf("list the receipt-signing keys: %w", err)
			}
			if asPEM {
				if kid != "" {
					i := slices.IndexFunc(keys, func(k *ledger.SigningKey) bool { return k.KeyID == kid })
					if i < 0 {
						return &usageError{msg: fmt.Sprintf("there is no receipt-signing key %q", kid), hint: "taskgate signing-keys list"}
					}
					keys = keys[i : i+1]
				}
				b, err := signingkeys.PEM(keys)
				if err != nil {
					return err
				}
				_, err = e.stdout.Write(b)
				return err
			}
			if jwks {
				b, err := signingkeys.JWKS(keys)
				if err != nil {
					return err
				}
				_, err = e.stdout.Write(b)
				return err
			}
			signing := signingkeys.Active(keys)
			views := make([]signingKeyView, len(keys))
			for i, k := range keys {
				status := "active"
				if !k.Active() {
					status = "retired"
				}
				views[i] = signingKeyView{KeyID: k.KeyID, Algorithm: string(k.Algorithm), Status: status, Signs: k == signing,
					SealedWith: signingkeys.SealedWith(k), CreatedAt: k.CreatedAt.UTC(), RetiredAt: k.RetiredAt.UTC()}
			}
			if asJSON {
				return writeJSON(e.stdout, views)
			}
			if len(views) == 0 {
				fmt.Fprintln(e.stderr, "No receipt-signing keys: receipts are not issued, only provisional. Create one with taskgate signing-keys create.")
				return nil
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KID\tALG\tSTATUS\tSIGNS\tSEALED WITH\tCREATED\tRETIRED")
			for _, v := range views {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", v.KeyID, v.Algorithm, v.Status, yesNo(v.Signs), dash(v.SealedWith), stamp(v.CreatedAt), stamp(v.RetiredAt))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "the gateway's configuration (its database)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	cmd.Flags().BoolVar(&jwks, "jwks", false, "print the public keys, retired ones too, as a JWK Set")
	cmd.Flags().BoolVar(&asPEM, "pem", false, "print the public keys, retired ones too, as PEM")
	cmd.Flags().StringVar(&kid, "kid", "", "with --pem, print this key alone")
	return cmd
}

func btoi(v bool) int {
	if v {
		return 1
	}
	return 0
}

func yesNo(v bool) string {
	if v {
		return "yes"
	}
	return "no"
}

func (e *env) signingKeysRetireCmd() *cobra.Command {
	var cfgPath string
	cmd := &cobra.Command{
		Use:   "retire KID [--config taskgate.yaml]",
		Short: "Retire a receipt-signing key: it signs no more, and receipts it signed still verify",
		Long: "retire erases the key's encrypted private part from the ledger, so that it can never sign again, and\n" +
			"keeps its public key in the JWK Set, so that the receipts it signed still verify. The newest key\n" +
			"still active signs from then on; with none, final receipts stay provisional and unsigned.",
		Example: "  taskgate signing-keys retire KID (see taskgate signing-keys list)",
		Args:    oneArg("the key ID (kid)", "taskgate signing-keys retire KID (see taskgate signing-keys list)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			store, _, _, err := e.signingLedger(cmd, cfgPath)
			if err != nil {
				return err
			}
			defer store.Close()
			ctx := cmd.Context()
			k, err := signingkeys.Retire(ctx, store, args[0], time.Time{})
			if errors.Is(err, ledger.ErrNotFound) {
				return &usageError{msg: fmt.Sprintf("there is no receipt-signing key %q", args[0]), hint: "taskgate signing-keys list"}
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "receipt-signing key %s retired at %s: its private part is erased, and receipts it signed still verify\n",
				k.KeyID, k.RetiredAt.UTC().Format(time.RFC3339))
			keys, err := store.SigningKeyList(ctx)
			if err != nil {
				return fmt.Errorf("list the receipt-signing keys: %w", err)
			}
			if next := signingkeys.Active(keys); next != nil {
				fmt.Fprintf(e.stderr, "Receipts are signed with key %s from now on.\n", next.KeyID)
			} else {
				fmt.Fprintln(e.stderr, "No key is active: receipts are not issued, only provisional, until taskgate signing-keys create.")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "the gateway's configuration (its database)")
	return cmd
}
