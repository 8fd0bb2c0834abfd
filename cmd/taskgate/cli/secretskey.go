package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/dburl"
	"github.com/taskgate/taskgate/secrets"
)

// secretsRing is the key ring the configuration names: its key file, or
// the keys in TASKGATE_SECRETS_KEYS; nil with secrets.store: plaintext or
// when neither is set.
func (e *env) secretsRing(cfg *config.Config) (*secrets.Ring, error) {
	if cfg.Secrets.Store == config.SecretsPlaintext {
		return nil, nil
	}
	ring, err := secrets.Load(cfg.Secrets.KeyFile, e.getenv(secrets.EnvKeys))
	if err != nil {
		return nil, fmt.Errorf("%s: secrets: %w", cfg.File, err)
	}
	return ring, nil
}

// openTenantHeaders opens cfg's sealed tenant header values with ring
// (nil: there is no key, and a sealed value is an error).
func openTenantHeaders(cfg *config.Config, ring *secrets.Ring) error {
	var open func(sealed, label string) ([]byte, error)
	if ring != nil {
		open = ring.OpenBytes
	}
	return cfg.OpenTenantHeaders(open)
}

func (e *env) secretsKeyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secrets-key",
		Short: "Create and rotate the keys that encrypt secret arguments in the ledger",
		Long: "The values of a tool's secret_arguments are kept in the ledger so that a recovery can re-send the\n" +
			"call; they are encrypted (AES-256-GCM) under the newest key of the key file named by\n" +
			"secrets.key_file (or held in " + secrets.EnvKeys + "), and erased once the operation has ended and been reconciled.\n" +
			"Every key in the file decrypts; the last one encrypts.",
	}
	cmd.AddCommand(e.secretsKeyCreateCmd(), e.secretsKeyRotateCmd(), e.secretsKeySealCmd())
	group(cmd)
	return cmd
}

func (e *env) secretsKeyCreateCmd() *cobra.Command {
	var (
		file, cfgPath string
		add           bool
	)
	cmd := &cobra.Command{
		Use:   "create (--file PATH | --config taskgate.yaml) [--add]",
		Short: "Write a new key file (mode 0600), or with --add a newer key into an existing one",
		Long: "create writes a new key, 256 random bits from the operating system, to a new file readable by its\n" +
			"owner only. It never overwrites a file: the keys in it may be the only way to decrypt secret\n" +
			"arguments in the ledger. The file is --file, or the configuration's secrets.key_file.\n\n" +
			"To rotate, run create --add: it appends a newer key, which encrypts from the next start of each\n" +
			"gateway while the older keys still decrypt. Restart every gateway on the ledger with the file, then\n" +
			"run taskgate secrets-key rotate to re-encrypt what the older keys encrypted.",
		Example: "  taskgate secrets-key create --file taskgate.keys\n  taskgate secrets-key create --config taskgate.yaml --add",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, err := e.keyFilePath(cmd, file, cfgPath)
			if err != nil {
				return err
			}
			write, verb := secrets.CreateFile, "created"
			if add {
				write, verb = secrets.AddKey, "added"
			}
			id, err := write(path)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "%s key %s in %s\n", verb, id, path)
			if add {
				fmt.Fprintln(e.stderr, "restart every gateway on the ledger with this file, then run taskgate secrets-key rotate --config taskgate.yaml")
			} else {
				fmt.Fprintf(e.stderr, "set secrets.key_file: %s in the configuration; back the file up apart from the ledger: without it, secret arguments kept for a recovery cannot be decrypted\n", path)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "file", "", "the key file to write")
	cmd.Flags().StringVar(&cfgPath, "config", "", "the configuration whose secrets.key_file to write")
	cmd.Flags().BoolVar(&add, "add", false, "append a newer key to an existing key file")
	return cmd
}

func (e *env) secretsKeySealCmd() *cobra.Command {
	var file, cfgPath, upstreamName, tenant, header, fromEnv string
	cmd := &cobra.Command{
		Use:   "seal (--file PATH | --config taskgate.yaml) --upstream NAME --tenant TENANT --header NAME [--from-env VARIABLE]",
		Short: "Seal a tenant's upstream credential for tenant_headers",
		Long: "seal encrypts one header value of an upstream's tenant_headers under the newest key of the key file\n" +
			"(--file, or the configuration's secrets.key_file) and prints it, to be written in the configuration as\n" +
			"{sealed: VALUE}. The value is bound to the upstream, the tenant and the header: it opens for no other.\n" +
			"The value is read from the environment variable --from-env, or else from the first line of standard\n" +
			"input, so that it never appears on a command line. The gateway opens it with the same key file.",
		Example: "  ACME_TOKEN='Bearer …' taskgate secrets-key seal --file taskgate.keys --upstream hosted_test --tenant acme --header Authorization --from-env ACME_TOKEN",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if upstreamName == "" || tenant == "" || header == "" {
				return &usageError{msg: "--upstream, --tenant and --header are required", hint: "taskgate secrets-key seal --file taskgate.keys --upstream hosted_test --tenant acme --header Authorization --from-env ACME_TOKEN"}
			}
			path, err := e.keyFilePath(cmd, file, cfgPath)
			if err != nil {
				return err
			}
			ring, err := secrets.LoadFile(path)
			if err != nil {
				return err
			}
			var value string
			if fromEnv != "" {
				value = e.getenv(fromEnv)
			} else {
				line, err := bufio.NewReader(e.stdin).ReadString('\n')
				if err != nil && !errors.Is(err, io.EOF) {
					return fmt.Errorf("reading the value from standard input: %w", err)
				}
				value = strings.TrimRight(line, "\r\n")
			}
			if value == "" || strings.ContainsAny(value, "\r\n\x00") {
				return &usageError{msg: "the value is empty or holds a line break or NUL; give the credential alone", hint: "taskgate secrets-key seal ... --from-env ACME_TOKEN"}
			}
			fmt.Fprintln(e.stdout, ring.SealBytes([]byte(value), config.TenantHeaderLabel(upstreamName, tenant, header)))
			fmt.Fprintf(e.stderr, "write it as upstreams[].tenant_headers.%s.%s: {sealed: VALUE} under upstream %s\n", tenant, header, upstreamName)
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "file", "", "the key file to seal with")
	cmd.Flags().StringVar(&cfgPath, "config", "", "the configuration whose secrets.key_file to seal with")
	cmd.Flags().StringVar(&upstreamName, "upstream", "", "the upstream's name")
	cmd.Flags().StringVar(&tenant, "tenant", "", "the tenant the credential is for")
	cmd.Flags().StringVar(&header, "header", "", "the header's name, such as Authorization")
	cmd.Flags().StringVar(&fromEnv, "from-env", "", "read the value from this environment variable (default: the first line of standard input)")
	return cmd
}

// keyFilePath is --file, or the configuration's secrets.key_file.
func (e *env) keyFilePath(cmd *cobra.Command, file, cfgPath string) (string, error) {
	switch {
	case file != "" && cfgPath != "":
		return "", &usageError{msg: "--file and --config both name a key file; give one", hint: "taskgate secrets-key create --file taskgate.keys"}
	case file != "":
		return file, nil
	case cfgPath == "":
		return "", &usageError{msg: "--file or --config is required", hint: "taskgate secrets-key create --file taskgate.keys"}
	}
	cfg, err := e.loadConfig(cmd, cfgPath)
	if err != nil {
		return "", err
	}
	if cfg.Secrets.KeyFile == "" {
		return "", &usageError{msg: cfgPath + " sets no secrets.key_file", hint: "taskgate secrets-key create --file taskgate.keys"}
	}
	return cfg.Secrets.KeyFile, nil
}

func (e *env) secretsKeyRotateCmd() *cobra.Command {
	var cfgPath string
	cmd := &cobra.Command{
		Use:   "rotate --config taskgate.yaml",
		Short: "Re-encrypt the secret arguments of open operations under the newest key",
		Long: "rotate re-encrypts, under the newest configured key, the secret arguments that operations still hold\n" +
			"(those not yet erased) sealed under an older key or, from before a key was configured, in plain\n" +
			"text; each operation in a transaction of its own. It prints how many operations hold secrets\n" +
			"under each key afterwards: once none is left under an older key, that key may be removed from the\n" +
			"key file. Run it only once every gateway on the ledger has been restarted with the newest key.\n" +
			"It exits 1 if any secret could not be decrypted (sealed with a key that is not configured, or\n" +
			"changed); those are left as they are.",
		Example: "  taskgate secrets-key rotate --config taskgate.yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := e.loadConfig(cmd, cfgPath)
			if err != nil {
				return err
			}
			ring, err := e.secretsRing(cfg)
			if err != nil {
				return err
			}
			if ring == nil {
				return &usageError{msg: "no secrets key is configured; set secrets.key_file or " + secrets.EnvKeys,
					hint: "taskgate secrets-key create --file taskgate.keys"}
			}
			ctx := cmd.Context()
			store, err := e.openLedgerWith(ctx, cfg.Database, ring)
			if err != nil {
				return err
			}
			defer store.Close()
			rep, err := store.SecretsReseal(ctx, &ledger.SecretsResealParams{Rotate: true})
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "re-encrypted the secret arguments of %d operation(s) under key %s in ledger %s\n",
				rep.Resealed, ring.Newest(), dburl.Describe(cfg.Database))
			for _, id := range slices.Sorted(maps.Keys(rep.Sealed)) {
				fmt.Fprintf(e.stdout, "  key %s: %d operation(s)\n", id, rep.Sealed[id])
			}
			if rep.Plaintext > 0 {
				fmt.Fprintf(e.stdout, "  plain text: %d operation(s)\n", rep.Plaintext)
			}
			if rep.Undecryptable > 0 {
				fmt.Fprintf(e.stderr, "Error: the secret arguments of %d operation(s) could not be decrypted with keys %v and were left as they are; add the key that sealed them to the key file, or resolve those operations\n",
					rep.Undecryptable, ring.KeyIDs())
				return &exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "the gateway's configuration (its database and secrets)")
	return cmd
}

// openLedgerWith opens the ledger at url with a secrets key ring and
// applies pending migrations.
func (e *env) openLedgerWith(ctx context.Context, url string, ring *secrets.Ring) (ledger.Store, error) {
	return dburl.Open(ctx, url, &dburl.Options{Logger: e.logger(), Migrate: true, Secrets: ring})
}
