package sqlstore

import (
	"context"
	"errors"
	"time"
)

// ConsoleSessionEnd implements ledger.Store.
func (s *Store) ConsoleSessionEnd(ctx context.Context, id string, expires, now time.Time) error {
	if id == "" {
		return errors.New("console session: an ID is required")
	}
	return s.InTx(ctx, func(tx Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM console_session_ends WHERE expires_at <= $1`, s.now(now)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO console_session_ends (session_id, expires_at) VALUES ($1, $2) ON CONFLICT (session_id) DO NOTHING`,
			id, s.now(expires))
		return err
	})
}

// ConsoleSessionEnded implements ledger.Store.
func (s *Store) ConsoleSessionEnded(ctx context.Context, id string) (bool, error) {
	var n int64
	if err := s.drv.Reader().QueryRow(ctx, `SELECT count(*) FROM console_session_ends WHERE session_id = $1`, id).Scan(&n); err != nil {
		return false, err
	}
	return n > 0, nil
}
