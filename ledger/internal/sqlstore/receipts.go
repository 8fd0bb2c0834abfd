package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/taskgate/taskgate/ledger"
)

const receiptVersionColumns = `id, operation_ref, version, digest, previous, substance, kid, document, issued_at`

func scanReceiptVersion(r Row) (*ledger.ReceiptVersion, error) {
	var (
		v        ledger.ReceiptVersion
		previous sql.NullString
		doc      string
	)
	if err := r.Scan(&v.ID, &v.OperationRef, &v.Version, &v.Digest, &previous, &v.Substance, &v.KeyID, &doc, ts{&v.IssuedAt}); err != nil {
		return nil, err
	}
	v.Previous, v.Document = previous.String, []byte(doc)
	return &v, nil
}

// ReceiptIssue implements ledger.Store.
func (s *Store) ReceiptIssue(ctx context.Context, v *ledger.ReceiptVersion) (*ledger.ReceiptVersion, error) {
	switch {
	case v.OperationRef == 0 || v.Version < 1:
		return nil, errors.New("issue a receipt: an operation and a version from 1 are required")
	case v.Digest == "" || v.Substance == "" || v.KeyID == "" || len(v.Document) == 0:
		return nil, fmt.Errorf("issue version %d of the receipt of operation %d: its digest, substance, key and document are required", v.Version, v.OperationRef)
	case (v.Version == 1) != (v.Previous == ""):
		return nil, fmt.Errorf("issue version %d of the receipt of operation %d: every version but the first names the one before it", v.Version, v.OperationRef)
	}
	var previous any
	if v.Previous != "" {
		previous = v.Previous
	}
	var out *ledger.ReceiptVersion
	err := s.InTx(ctx, func(tx Tx) error {
		latest, err := scanReceiptVersion(tx.QueryRow(ctx, `SELECT `+receiptVersionColumns+` FROM receipt_versions
			WHERE operation_ref = $1 ORDER BY version DESC LIMIT 1`, v.OperationRef))
		switch err = s.drv.Interpret(err); {
		case errors.Is(err, ledger.ErrNotFound):
			if v.Version != 1 {
				return ledger.ErrReceiptVersionTaken
			}
		case err != nil:
			return err
		case latest.Version+1 != v.Version || latest.Digest != v.Previous:
			return ledger.ErrReceiptVersionTaken
		}
		// The unique (operation_ref, version) settles two issues that
		// both read the same latest version.
		out, err = scanReceiptVersion(tx.QueryRow(ctx, `INSERT INTO receipt_versions
			(operation_ref, version, digest, previous, substance, kid, document, issued_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (operation_ref, version) DO NOTHING RETURNING `+receiptVersionColumns,
			v.OperationRef, v.Version, v.Digest, previous, v.Substance, v.KeyID, string(v.Document), s.now(v.IssuedAt)))
		if errors.Is(s.drv.Interpret(err), ledger.ErrNotFound) {
			return ledger.ErrReceiptVersionTaken
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("issue version %d of the receipt of operation %d: %w", v.Version, v.OperationRef, err)
	}
	return out, nil
}

// ReceiptVersions implements ledger.Store.
func (s *Store) ReceiptVersions(ctx context.Context, operationRef int64) ([]*ledger.ReceiptVersion, error) {
	return queryAll(ctx, s.drv.Reader(), scanReceiptVersion, `SELECT `+receiptVersionColumns+` FROM receipt_versions
		WHERE operation_ref = $1 ORDER BY version`, operationRef)
}
