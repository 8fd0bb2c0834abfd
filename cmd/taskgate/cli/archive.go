package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskgate/taskgate/archive"
	"github.com/taskgate/taskgate/internal/inert"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/receipt/issue"
	"github.com/taskgate/taskgate/signingkeys"
)

func (e *env) archiveCmd() *cobra.Command {
	var (
		cfgPath, out string
		endedBefore  time.Duration
		retention    time.Duration
		batch        int
	)
	cmd := &cobra.Command{
		Use:   "archive --ended-before DURATION --out DIR",
		Short: "Move ended, reconciled operations into signed archive files, then delete them from the ledger",
		Long: "archive writes every operation that ended more than --ended-before ago, whose issued receipt says its\n" +
			"reconciliation is complete and covers its chain head, and which holds nothing against an open budget,\n" +
			"to --out: one gzip-compressed JSON Lines file per UTC day of end time (the operation with its attempts,\n" +
			"events, remote jobs, charges, approval, approval request, reservations and issued receipts), a manifest\n" +
			"of the files' digests, and a checkpoint signed with the active receipt-signing key (a DSSE envelope\n" +
			"holding each file's digest and each operation's chain head). Each run writes new files and never\n" +
			"rewrites one. Only once they are written, synced and read back does it delete the operations, in\n" +
			"batches of --batch, leaving a tombstone of each: a retry of an archived operation ID within the\n" +
			"retention is refused as operation_archived and starts nothing. taskgate verify --archive checks an\n" +
			"archive offline; taskgate receipt ID --archive DIR reads an archived receipt. With retention.archive in\n" +
			"its configuration, a gateway archives on a schedule itself (docs/archives.md).",
		Example: "  taskgate archive --ended-before 720h --out /var/lib/taskgate/archive --config taskgate.yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" || endedBefore <= 0 {
				return &usageError{msg: "archive needs --out and a positive --ended-before", hint: "taskgate archive --ended-before 720h --out archive --config taskgate.yaml"}
			}
			if retention <= 0 && cfgPath != "" {
				cfg, err := e.loadConfig(cmd, cfgPath)
				if err != nil {
					return err
				}
				retention = cfg.Retention.OperationIDs
			}
			if retention <= 0 {
				retention = defaultRetention
			}
			ctx := cmd.Context()
			s, ring, _, err := e.signingLedger(cmd, cfgPath)
			if err != nil {
				return err
			}
			defer s.Close()
			now := time.Now()
			res, err := archive.Run(ctx, s, signingkeys.NewSigner(s, ring), &archive.Options{
				Out: out, EndedBefore: now.Add(-endedBefore), Retention: retention, Batch: batch, Now: now,
			})
			if errors.Is(err, signingkeys.ErrNoRing) {
				return noSigningRing(cmd, err)
			}
			if err != nil {
				return err
			}
			if res.Operations == 0 {
				fmt.Fprintf(e.stdout, "nothing to archive: no operation that ended before %s is ready%s\n", now.Add(-endedBefore).UTC().Format(time.RFC3339), skipped(res))
				return nil
			}
			fmt.Fprintf(e.stdout, "archived %s in %s as run %d, deleted %s from the ledger%s\n",
				plural(res.Operations, "operation"), plural(len(res.Files), "file"), res.Run, plural(res.Pruned, "operation"), skipped(res))
			for _, f := range res.Files {
				fmt.Fprintf(e.stdout, "  %s  %s  sha256 %s\n", f.Name, plural(f.Operations, "operation"), f.SHA256)
			}
			if res.Kept > 0 {
				fmt.Fprintf(e.stdout, "%s changed after being archived and stay in the ledger; a later run archives them again\n", plural(res.Kept, "operation"))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "the gateway's configuration (its database, retention and the secrets keys that open the signing key)")
	cmd.Flags().StringVar(&out, "out", "", "the archive directory (created if missing)")
	cmd.Flags().DurationVar(&endedBefore, "ended-before", 0, "archive operations that ended longer ago than this, e.g. 720h")
	cmd.Flags().DurationVar(&retention, "retention", 0, "how long after its end an archived operation ID stays refused (default: --config's retention.operation_ids, else 24h)")
	cmd.Flags().IntVar(&batch, "batch", ledger.DefaultArchiveBatch, "operations deleted per transaction")
	return cmd
}

// defaultRetention is the configuration's default retention, for a run
// without --config.
const defaultRetention = 24 * time.Hour

// skipped says, after a run's summary, what stayed and why.
func skipped(res *archive.Result) string {
	if len(res.Skipped) == 0 {
		return ""
	}
	s := "; kept"
	for i, k := range slices.Sorted(maps.Keys(res.Skipped)) {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprintf(" %d %s", res.Skipped[k], k)
	}
	return s
}

// verifyArchive checks the archive in dir against the key set in jwks, or
// the ledger's signing keys.
func (e *env) verifyArchive(cmd *cobra.Command, dir, jwks string) error {
	ctx := cmd.Context()
	var keys receipt.PublicKeys
	if jwks != "" {
		var err error
		if keys, err = signingkeys.LoadJWKS(ctx, jwks, nil); err != nil {
			return err
		}
	} else {
		s, err := e.openStore(ctx)
		if err != nil {
			return err
		}
		list, err := s.SigningKeyList(ctx)
		s.Close()
		if err != nil {
			return fmt.Errorf("list the receipt-signing keys: %w", err)
		}
		keys = signingkeys.PublicKeys(list)
	}
	rep, err := archive.Verify(ctx, dir, keys)
	if err != nil {
		return err
	}
	if p := rep.Problem; p != nil {
		fmt.Fprintf(e.stderr, "Error: the archive in %s does not verify: %s\n", inert.Terminal(dir), inert.Terminal(p.Error()))
		return &exitError{code: 1}
	}
	fmt.Fprintf(e.stdout, "the archive in %s verifies: %s, %s, %s; every checkpoint signature, file digest and hash chain holds\n",
		inert.Terminal(dir), plural(rep.Runs, "run"), plural(rep.Files, "file"), plural(rep.Operations, "operation"))
	return nil
}

// archivedReceipt prints the issued receipt of an archived operation, read
// from the archive in dir.
func (e *env) archivedReceipt(dir, tenant, id, format string) error {
	r, file, err := archive.Find(dir, tenant, id)
	if err != nil {
		return err
	}
	rd := &issue.Reading{Versions: r.Versions()}
	v := rd.Latest()
	if v == nil {
		return fmt.Errorf("operation %s in %s has no issued receipt", inert.Terminal(id), file)
	}
	if rd.Receipt, err = receipt.Issued(v.Document, v.KeyID); err != nil {
		return fmt.Errorf("read version %d of the receipt of operation %s in %s: %w", v.Version, inert.Terminal(id), file, err)
	}
	rd.Receipt.Issue.IssuedAt = v.IssuedAt.UTC()
	b, err := rd.Render(format)
	if err != nil {
		return err
	}
	_, err = e.stdout.Write(b)
	return err
}

// archivedDetail is what ops show prints of the operation id of tenant
// (any, when empty) as the archive in dir holds it.
func archivedDetail(dir, tenant, id string) (*detail, error) {
	r, _, err := archive.Find(dir, tenant, id)
	if err != nil {
		return nil, err
	}
	// A JSON column the ledger held as NULL reads back from the archive's
	// JSON as the literal null: it is absent again, as ops show prints it.
	op := *r.Operation
	for _, raw := range []*json.RawMessage{&op.Result, &op.Error, &op.InputRequests, &op.InputResponses} {
		if string(*raw) == "null" {
			*raw = nil
		}
	}
	evs := make([]*ledger.Event, 0, len(r.Events))
	for _, ev := range r.Events {
		evs = append(evs, &ledger.Event{Kind: ledger.EventKind(ev.Kind), Data: json.RawMessage(ev.Data), CreatedAt: ev.CreatedAt})
	}
	return newDetail(&op, r.Attempts, r.RemoteJobs, r.Charges, evs), nil
}
