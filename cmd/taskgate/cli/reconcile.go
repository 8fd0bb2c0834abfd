package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/taskgate/taskgate/config"
	"github.com/taskgate/taskgate/internal/inert"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/ledger/dburl"
	"github.com/taskgate/taskgate/provider"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/upstream"
	"github.com/taskgate/taskgate/worker"
)

func (e *env) reconcileCmd() *cobra.Command {
	var (
		cfgPath string
		tenant  string
	)
	cmd := &cobra.Command{
		Use:   "reconcile [OPERATION_ID|TASK_ID] --config taskgate.yaml",
		Short: "Reconcile an operation, or every open one, with its provider now",
		Long: "reconcile asks the provider about an operation's remote jobs and charges now, records what it finds\n" +
			"in the ledger, as the gateway's own reconciler does, and prints the receipt's figures.\n\n" +
			"Without an ID it reconciles every open operation, newest first: each one that has not ended\n" +
			"(accepted, sending, running, input_required or review) and each ended one whose receipt's reconciliation_status\n" +
			"is not complete. It reads the whole ledger (or the tenant's part) to find them.\n\n" +
			"It needs the gateway's own configuration, for the upstreams and provider contracts the operations\n" +
			"ran under, and opens that configuration's database unless --db or TASKGATE_DB names another.",
		Example: "  taskgate reconcile settlement-regression-842 --config taskgate.yaml\n  taskgate reconcile --config taskgate.yaml --tenant acme",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := e.loadConfig(cmd, cfgPath)
			if err != nil {
				return err
			}
			ring, err := e.secretsRing(cfg)
			if err != nil {
				return err
			}
			if err := openTenantHeaders(cfg, ring); err != nil {
				return err
			}
			ctx := cmd.Context()
			store, err := e.openLedgerWith(ctx, cfg.Database, ring)
			if err != nil {
				return err
			}
			defer store.Close()
			var ops []*ledger.Operation
			if len(args) == 1 {
				op, err := findOperation(ctx, store, tenant, args[0])
				if err != nil {
					return err
				}
				ops = []*ledger.Operation{op}
			} else if ops, err = openOperations(ctx, store, tenant); err != nil {
				return err
			}
			catalog := provider.NewCatalog(cfg)
			if err := configured(cfg, catalog, ops); err != nil {
				return err
			}
			if len(ops) == 0 {
				fmt.Fprintf(e.stderr, "no open operations in ledger %s\n", dburl.Describe(cfg.Database))
				return nil
			}
			log := e.logger()
			pool := upstream.NewPool(cfg.Upstreams, &upstream.Options{Logger: log})
			pool.Start(ctx)
			defer pool.Close()
			w, err := worker.New(&worker.Options{Store: store, Upstreams: worker.FromPool(pool), Catalog: catalog, Config: cfg, Logger: log, Secrets: ring})
			if err != nil {
				return err
			}
			for _, op := range ops {
				if _, err := w.Reconcile(ctx, op.ID); err != nil {
					return fmt.Errorf("reconcile %s: %w", op.OperationID, err)
				}
				op, err = store.OperationGet(ctx, &ledger.OperationGetParams{ID: op.ID})
				if err != nil {
					return err
				}
				in, err := receipt.Load(ctx, store, op, nil)
				if err != nil {
					return err
				}
				r := receipt.Build(in)
				fmt.Fprintf(e.stdout, "%s\t%s\tjobs %d\tduplicates %d\tfinal %s\treconciliation %s\treview %s\n",
					inert.Terminal(op.OperationID), inert.Terminal(op.Tenant), r.ObservedRemoteJobs, r.DuplicateJobs, r.FinalCostUSD.String(), r.ReconciliationStatus, r.ReviewStatus)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "the gateway's configuration file (YAML), naming the upstreams and provider contracts")
	cmd.Flags().StringVar(&tenant, "tenant", "", "only this tenant's operations; with an ID, the tenant it belongs to (needed when several tenants use the same operation ID)")
	return cmd
}

// openOperations lists the operations reconcile looks at without an ID:
// those that have not ended, and ended ones whose receipt is not yet
// reconciled, newest first.
func openOperations(ctx context.Context, s ledger.Store, tenant string) ([]*ledger.Operation, error) {
	var out []*ledger.Operation
	p := &ledger.OperationListParams{Tenant: tenant, Limit: 200}
	for {
		page, err := s.OperationList(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("list operations: %w", err)
		}
		for _, op := range page {
			open := !op.State.Terminal()
			if !open {
				in, err := receipt.Load(ctx, s, op, nil)
				if err != nil {
					return nil, err
				}
				open = receipt.Build(in).ReconciliationStatus != receipt.ReconciliationComplete
			}
			if open {
				out = append(out, op)
			}
		}
		if len(page) < p.Limit {
			return out, nil
		}
		p.BeforeID = page[len(page)-1].ID
	}
}

// configured refuses to reconcile operations whose tool the configuration
// does not hold as consequential: without its provider contract the
// reconciler could only record that it could not ask.
func configured(cfg *config.Config, catalog *provider.Catalog, ops []*ledger.Operation) error {
	var missing []string
	for _, op := range ops {
		if name := op.Upstream + "." + op.Tool; catalog.ForOperation(op.Upstream, op.Tool, op.Contract) == nil && !slices.Contains(missing, name) {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return &usageError{
		msg: fmt.Sprintf("%s has no consequential tool %s, which the operations to reconcile ran; pass the gateway's own configuration",
			cfg.File, strings.Join(missing, ", ")),
		hint: "taskgate reconcile --config FILE, where FILE is the configuration taskgate serve runs with",
	}
}
