package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/taskgate/taskgate/ledger"
)

// OperationsToArchive implements ledger.Store.
func (s *Store) OperationsToArchive(ctx context.Context, p *ledger.ArchiveListParams) ([]*ledger.Operation, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = ledger.DefaultArchiveBatch
	}
	ops, err := queryAll(ctx, s.drv.Reader(), scanOperation, `SELECT `+operationColumns+` FROM operations
		WHERE ended_at IS NOT NULL AND ended_at < $1 AND id > $2 ORDER BY id LIMIT $3`, s.now(p.EndedBefore), p.AfterRef, limit)
	if err != nil {
		return nil, fmt.Errorf("list the operations that ended before %s: %w", p.EndedBefore.UTC().Format("2006-01-02T15:04:05Z"), err)
	}
	return ops, nil
}

// pruneStatements delete what an operation owns, dependants first, so that
// no foreign key points at a deleted row. Each takes the operation's row ID.
var pruneStatements = []string{
	`DELETE FROM receipt_versions WHERE operation_ref = $1`,
	`DELETE FROM charges WHERE operation_ref = $1`,
	`DELETE FROM events WHERE operation_ref = $1`,
	`DELETE FROM remote_jobs WHERE operation_ref = $1`,
	`DELETE FROM reservations WHERE operation_ref = $1`,
	`DELETE FROM budget_reservations WHERE operation_ref = $1`,
	`DELETE FROM approval_requests WHERE operation_ref = $1`,
	`DELETE FROM attempts WHERE operation_ref = $1 OR related_ref = $1`,
}

// OperationsPrune implements ledger.Store.
func (s *Store) OperationsPrune(ctx context.Context, tombstones []*ledger.Tombstone) error {
	if len(tombstones) == 0 {
		return nil
	}
	err := s.InTx(ctx, func(tx Tx) error {
		now := s.now(time.Time{})
		for _, t := range tombstones {
			// Lock the row and check it is still what was archived: ended,
			// with the head the archive holds.
			var id int64
			err := tx.QueryRow(ctx, `SELECT id FROM operations WHERE id = $1 AND ended_at IS NOT NULL AND chain_head = $2`+s.drv.ForUpdate(),
				t.OperationRef, t.ChainHead).Scan(&id)
			if errors.Is(s.drv.Interpret(err), ledger.ErrNotFound) {
				return fmt.Errorf("operation %q (row %d) is no longer as it was archived: %w", t.OperationID, t.OperationRef, ledger.ErrStateChanged)
			}
			if err != nil {
				return fmt.Errorf("lock operation %q: %w", t.OperationID, err)
			}
			for _, q := range pruneStatements {
				if _, err := tx.Exec(ctx, q, t.OperationRef); err != nil {
					return fmt.Errorf("delete what operation %q owns: %w", t.OperationID, err)
				}
			}
			if _, err := tx.Exec(ctx, `DELETE FROM operations WHERE id = $1`, t.OperationRef); err != nil {
				return fmt.Errorf("delete operation %q: %w", t.OperationID, err)
			}
			archivedAt := t.ArchivedAt
			if archivedAt.IsZero() {
				archivedAt = now
			}
			if _, err := tx.Exec(ctx, `INSERT INTO archived_operations
				(operation_ref, tenant, operation_id, task_id, ended_at, chain_head, archive_file, key_until, archived_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
				t.OperationRef, t.Tenant, t.OperationID, t.TaskID, s.now(t.EndedAt), t.ChainHead, t.ArchiveFile, s.now(t.KeyUntil), s.now(archivedAt)); err != nil {
				return fmt.Errorf("record the tombstone of operation %q: %w", t.OperationID, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("prune %d archived operations: %w", len(tombstones), err)
	}
	return nil
}

const tombstoneColumns = `operation_ref, tenant, operation_id, task_id, ended_at, chain_head, archive_file, key_until, archived_at`

func scanTombstone(r Row) (*ledger.Tombstone, error) {
	var t ledger.Tombstone
	if err := r.Scan(&t.OperationRef, &t.Tenant, &t.OperationID, &t.TaskID, ts{&t.EndedAt}, &t.ChainHead, &t.ArchiveFile, ts{&t.KeyUntil}, ts{&t.ArchivedAt}); err != nil {
		return nil, err
	}
	return &t, nil
}

// TombstoneList implements ledger.Store.
func (s *Store) TombstoneList(ctx context.Context, tenant, operationID string) ([]*ledger.Tombstone, error) {
	out, err := queryAll(ctx, s.drv.Reader(), scanTombstone, `SELECT `+tombstoneColumns+` FROM archived_operations
		WHERE tenant = $1 AND operation_id = $2 ORDER BY id`, tenant, operationID)
	if err != nil {
		return nil, fmt.Errorf("read the tombstones of operation %q: %w", operationID, err)
	}
	return out, nil
}

// TombstonesExpire implements ledger.Store.
func (s *Store) TombstonesExpire(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int
	err := s.InTx(ctx, func(tx Tx) error {
		res, err := tx.Exec(ctx, `DELETE FROM archived_operations WHERE id IN
			(SELECT id FROM archived_operations WHERE key_until < $1 ORDER BY id LIMIT $2)`, s.now(before), limit)
		if err != nil {
			return err
		}
		n = int(res)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("delete the tombstones released before %s: %w", before.UTC().Format(time.RFC3339), err)
	}
	return n, nil
}

// archivedKey returns the tombstone that still holds (tenant, operation ID)
// at now, or nil when none does.
func (s *Store) archivedKey(ctx context.Context, q Querier, tenant, operationID string, now time.Time) (*ledger.Tombstone, error) {
	t, err := scanTombstone(q.QueryRow(ctx, `SELECT `+tombstoneColumns+` FROM archived_operations
		WHERE tenant = $1 AND operation_id = $2 AND key_until > $3 ORDER BY id DESC LIMIT 1`, tenant, operationID, now))
	if errors.Is(s.drv.Interpret(err), ledger.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look for an archived operation %q: %w", operationID, err)
	}
	return t, nil
}
