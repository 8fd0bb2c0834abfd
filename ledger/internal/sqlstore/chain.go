package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/taskgate/taskgate/ledger"
)

// ChainList implements ledger.Store. One statement reads the operations
// and their events: both databases run a statement on one snapshot, so
// every head is read with exactly the events it was written after.
func (s *Store) ChainList(ctx context.Context, p *ledger.ChainListParams) ([]*ledger.Chain, error) {
	args := []any{p.AfterRef}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	conds := []string{"id > $1"}
	if p.Tenant != "" {
		conds = append(conds, "tenant = "+arg(p.Tenant))
	}
	if len(p.OperationIDs) > 0 {
		ph := make([]string, len(p.OperationIDs))
		for i, id := range p.OperationIDs {
			ph[i] = arg(id)
		}
		conds = append(conds, "operation_id IN ("+strings.Join(ph, ", ")+")")
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.drv.Reader().Query(ctx, `SELECT o.id, o.tenant, o.operation_id, o.chain_head,
			e.id, e.attempt_ref, e.kind, e.data, e.created_at, e.hash, e.prev_hash
		FROM (SELECT id, tenant, operation_id, chain_head FROM operations WHERE `+strings.Join(conds, " AND ")+`
			ORDER BY id LIMIT `+arg(limit)+`) o
		LEFT JOIN events e ON e.operation_ref = o.id
		ORDER BY o.id, e.id`, args...)
	if err != nil {
		return nil, fmt.Errorf("read the hash chains: %w", err)
	}
	defer rows.Close()
	var out []*ledger.Chain
	for rows.Next() {
		var (
			c                      ledger.Chain
			e                      ledger.Event
			kind, data, hash, prev sql.NullString
		)
		if err := rows.Scan(&c.OperationRef, &c.Tenant, &c.OperationID, &c.Head,
			nullInt{&e.ID}, nullInt{&e.AttemptRef}, &kind, &data, ts{&e.CreatedAt}, &hash, &prev); err != nil {
			return nil, fmt.Errorf("read the hash chains: %w", err)
		}
		if n := len(out); n == 0 || out[n-1].OperationRef != c.OperationRef {
			out = append(out, &c)
		}
		if e.ID == 0 {
			continue // an operation without events
		}
		e.OperationRef = c.OperationRef
		e.Kind, e.Data = ledger.EventKind(kind.String), json.RawMessage(data.String)
		e.Hash, e.PrevHash = hash.String, prev.String
		cur := out[len(out)-1]
		cur.Events = append(cur.Events, &e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the hash chains: %w", err)
	}
	return out, nil
}
