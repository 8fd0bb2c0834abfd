package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/taskgate/taskgate/ledger"
)

const keyColumns = `id, tenant, key_hash, label, role, created_at, revoked_at`

func scanKey(r Row) (*ledger.APIKey, error) {
	var k ledger.APIKey
	if err := r.Scan(&k.ID, &k.Tenant, &k.Hash, &k.Label, &k.Role, ts{&k.CreatedAt}, ts{&k.RevokedAt}); err != nil {
		return nil, err
	}
	return &k, nil
}

// KeyCreate implements ledger.Store.
func (s *Store) KeyCreate(ctx context.Context, k *ledger.APIKey) (*ledger.APIKey, error) {
	if k.Tenant == "" || len(k.Hash) != 64 {
		return nil, errors.New("api key: a tenant and a hex SHA-256 hash are required")
	}
	role := k.Role
	if role == "" {
		role = ledger.RoleAgent
	}
	if role != ledger.RoleAgent && role != ledger.RoleApprover {
		return nil, fmt.Errorf("api key: role %q is not a role; use %s or %s", k.Role, ledger.RoleAgent, ledger.RoleApprover)
	}
	var out *ledger.APIKey
	err := s.InTx(ctx, func(tx Tx) error {
		var err error
		out, err = scanKey(tx.QueryRow(ctx, `INSERT INTO api_keys (tenant, key_hash, label, role, created_at) VALUES ($1, $2, $3, $4, $5) RETURNING `+keyColumns,
			k.Tenant, k.Hash, k.Label, role, s.now(k.CreatedAt)))
		return err
	})
	return out, err
}

// KeyByHash implements ledger.Store.
func (s *Store) KeyByHash(ctx context.Context, hash string) (*ledger.APIKey, error) {
	k, err := scanKey(s.drv.Reader().QueryRow(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL`, hash))
	if err != nil {
		return nil, s.notFound(err, "api key")
	}
	return k, nil
}

// KeyList implements ledger.Store.
func (s *Store) KeyList(ctx context.Context, tenant string) ([]*ledger.APIKey, error) {
	q, args := `SELECT `+keyColumns+` FROM api_keys`, []any{}
	if tenant != "" {
		q, args = q+` WHERE tenant = $1`, append(args, tenant)
	}
	return queryAll(ctx, s.drv.Reader(), scanKey, q+` ORDER BY id`, args...)
}

// KeyRevoke implements ledger.Store.
func (s *Store) KeyRevoke(ctx context.Context, id int64, now time.Time) error {
	return s.InTx(ctx, func(tx Tx) error {
		n, err := tx.Exec(ctx, `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2`, s.now(now), id)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("api key %d: %w", id, ledger.ErrNotFound)
		}
		return nil
	})
}
