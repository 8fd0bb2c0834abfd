package cli

import (
	"log/slog"
	"strings"

	"github.com/spf13/cobra"

	"github.com/taskgate/taskgate/signingkeys"
	"github.com/taskgate/taskgate/sim/demo"
)

func (e *env) demoCmd() *cobra.Command {
	var (
		keep, algorithm string
		quiet           bool
	)
	cmd := &cobra.Command{
		Use:   "demo [--keep DIR] [--quiet] [--signing-algorithm ed25519|ecdsa-p256]",
		Short: "Show a lost response, two retries and the receipt, against a simulated paid provider",
		Long: "demo runs the whole story in this process on an embedded SQLite ledger: a gateway in front of a\n" +
			"simulated paid provider, an agent whose first call loses its response, a retry with the same\n" +
			"operation ID that attaches, a retry under a new operation ID that is denied, the reconciled\n" +
			"receipt, and the same calls sent straight to the provider for comparison; it ends by writing the\n" +
			"run's review packet with signed receipts (DIR/review with --keep) and verifying the operation's\n" +
			"receipt offline from the packet's files. It exits non-zero unless the receipt shows one remote\n" +
			"job, no duplicate, 17.84 USD, complete and ready, the providers' own records show one job behind\n" +
			"taskgate and two, 35.68 USD, without it, the packet is ready and the receipt verifies.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := noLedger(cmd, "runs on a temporary ledger of its own (see --keep)"); err != nil {
				return err
			}
			alg, err := signingkeys.ParseAlgorithm(algorithm)
			if err != nil {
				return &usageError{msg: err.Error(), hint: "taskgate demo --signing-algorithm ecdsa-p256"}
			}
			log := slog.New(slog.DiscardHandler)
			if e.logLevel != "" {
				log = e.logger()
			}
			out, err := demo.Run(cmd.Context(), e.stdout, &demo.Options{Dir: keep, Quiet: quiet, Logger: log, SigningAlgorithm: alg, Getenv: e.getenv})
			if err != nil {
				return err
			}
			if !out.OK() {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&keep, "keep", "", "keep the ledger and the gateway's configuration in this directory")
	cmd.Flags().BoolVar(&quiet, "quiet", false, "print only the receipt and the verdict")
	cmd.Flags().StringVar(&algorithm, "signing-algorithm", signingkeys.Algorithms[0], "the algorithm of the key that signs the receipts: "+strings.Join(signingkeys.Algorithms, " or "))
	return cmd
}
