package cli

import (
	"cmp"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskgate/taskgate/authn"
	"github.com/taskgate/taskgate/internal/inert"
	"github.com/taskgate/taskgate/ledger"
)

func (e *env) keysCmd() *cobra.Command {
	keys := &cobra.Command{
		Use:   "keys",
		Short: "Create, list and revoke tenants' API keys",
		Long: "An API key authenticates a tenant's agents and scripts to the gateway. Only its SHA-256 hash is\n" +
			"stored: the key itself is shown once, when it is created.",
	}
	keys.AddCommand(e.keysCreateCmd(), e.keysListCmd(), e.keysRevokeCmd())
	group(keys)
	return keys
}

func (e *env) keysCreateCmd() *cobra.Command {
	var tenant, label, role string
	cmd := &cobra.Command{
		Use:   "create --tenant T [--label L] [--role agent|approver]",
		Short: "Create an API key for a tenant and print it, once",
		Long: "create makes an API key for a tenant and prints it once on stdout; only its hash is stored.\n" +
			"An agent key (the default) calls tools. An approver key may also create and revoke the\n" +
			"tenant's approvals through POST and DELETE /v1/approvals: give it to the humans who approve\n" +
			"spend, never to the agents whose calls they approve.",
		Example: "  taskgate keys create --tenant acme --label ci\n  taskgate keys create --tenant acme --label alice --role approver",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags(cmd, "taskgate keys create --tenant acme --label ci", "tenant"); err != nil {
				return err
			}
			if role != ledger.RoleAgent && role != ledger.RoleApprover {
				return &usageError{
					msg:  fmt.Sprintf("--role %q is not a role; use %s or %s", role, ledger.RoleAgent, ledger.RoleApprover),
					hint: "taskgate keys create --tenant acme --role approver",
				}
			}
			s, err := e.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			plaintext, key, err := authn.NewAPIKeyWithRole(cmd.Context(), s, tenant, label, role)
			if err != nil {
				return err
			}
			// The key alone goes to stdout so that it can be captured by a
			// script; the notice goes to stderr, where a person sees it.
			fmt.Fprintln(e.stdout, plaintext)
			fmt.Fprintf(e.stderr, "Created %s API key %d for tenant %q. Store it now: it will not be shown again.\n", role, key.ID, key.Tenant)
			return nil
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "the tenant the key authenticates as")
	cmd.Flags().StringVar(&label, "label", "", "a note on what the key is for, shown by keys list")
	cmd.Flags().StringVar(&role, "role", ledger.RoleAgent, "agent (calls tools) or approver (may also create and revoke approvals)")
	return cmd
}

// keyView is an API key as keys list prints it in JSON: never the key, not
// even its hash.
type keyView struct {
	ID        int64     `json:"id"`
	Tenant    string    `json:"tenant"`
	Label     string    `json:"label,omitempty"`
	Role      string    `json:"role"`
	CreatedAt time.Time `json:"created_at"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
}

func (e *env) keysListCmd() *cobra.Command {
	var (
		tenant string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List API keys (never the keys themselves)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := e.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			keys, err := s.KeyList(cmd.Context(), tenant)
			if err != nil {
				return fmt.Errorf("list API keys: %w", err)
			}
			views := make([]keyView, len(keys))
			for i, k := range keys {
				views[i] = keyView{ID: k.ID, Tenant: k.Tenant, Label: k.Label, Role: cmp.Or(k.Role, ledger.RoleAgent), CreatedAt: k.CreatedAt.UTC(), RevokedAt: k.RevokedAt.UTC()}
			}
			if asJSON {
				return writeJSON(e.stdout, views)
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTENANT\tROLE\tLABEL\tCREATED\tREVOKED")
			for _, v := range views {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", v.ID, inert.Terminal(v.Tenant), v.Role, inert.Terminal(dash(v.Label)), stamp(v.CreatedAt), stamp(v.RevokedAt))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "only this tenant's keys")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}

func (e *env) keysRevokeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke an API key: requests that present it are refused from now on",
		Args:  oneArg("the API key ID", "taskgate keys revoke ID (see taskgate keys list)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := idArg(args[0], "API key", "taskgate keys list")
			if err != nil {
				return err
			}
			s, err := e.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			err = s.KeyRevoke(cmd.Context(), id, time.Time{})
			if errors.Is(err, ledger.ErrNotFound) {
				return &usageError{msg: fmt.Sprintf("there is no API key %d", id), hint: "taskgate keys list"}
			}
			if err != nil {
				return fmt.Errorf("revoke API key %d: %w", id, err)
			}
			fmt.Fprintf(e.stdout, "API key %d revoked; requests that present it are refused\n", id)
			return nil
		},
	}
}
