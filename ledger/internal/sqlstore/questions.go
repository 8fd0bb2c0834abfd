package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/money"
)

const questionColumns = `id, nonce, tenant, operation_id, tool, fingerprint, estimate_micros, currency,
	created_at, expires_at, answered_at`

func scanQuestion(r Row) (*ledger.ApprovalQuestion, error) {
	var (
		q        ledger.ApprovalQuestion
		micros   int64
		currency string
	)
	err := r.Scan(&q.ID, &q.Nonce, &q.Tenant, &q.OperationID, &q.Tool, &q.Fingerprint, &micros, &currency,
		ts{&q.CreatedAt}, ts{&q.ExpiresAt}, ts{&q.AnsweredAt})
	if err != nil {
		return nil, err
	}
	q.Estimate = money.FromMicros(micros, currency)
	return &q, nil
}

// ApprovalQuestionCreate implements ledger.Store.
func (s *Store) ApprovalQuestionCreate(ctx context.Context, q *ledger.ApprovalQuestion) (*ledger.ApprovalQuestion, error) {
	switch {
	case len(q.Nonce) < 16:
		return nil, errors.New("approval question: a nonce of at least 16 characters is required")
	case q.Tenant == "" || q.OperationID == "" || q.Tool == "" || q.Fingerprint == "":
		return nil, errors.New("approval question: tenant, operation ID, tool and fingerprint are required")
	case q.ExpiresAt.IsZero():
		return nil, errors.New("approval question: an expiry time is required")
	}
	currency := q.Estimate.Currency
	if currency == "" {
		currency = money.DefaultCurrency
	}
	var out *ledger.ApprovalQuestion
	err := s.InTx(ctx, func(tx Tx) error {
		var err error
		out, err = scanQuestion(tx.QueryRow(ctx, `INSERT INTO approval_questions (nonce, tenant, operation_id, tool, fingerprint,
				estimate_micros, currency, created_at, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING `+questionColumns,
			q.Nonce, q.Tenant, q.OperationID, q.Tool, q.Fingerprint, q.Estimate.Micros, currency,
			s.now(q.CreatedAt), q.ExpiresAt.UTC().Truncate(time.Microsecond)))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("record approval question for %q: %w", q.OperationID, err)
	}
	return out, nil
}

// ApprovalQuestionTake implements ledger.Store. One conditional UPDATE both
// checks and takes the question, so of two concurrent answers exactly one
// finds it outstanding, on either database.
func (s *Store) ApprovalQuestionTake(ctx context.Context, p *ledger.ApprovalQuestionTakeParams) (*ledger.ApprovalQuestion, error) {
	if p.Nonce == "" {
		return nil, fmt.Errorf("approval question: no nonce: %w", ledger.ErrNotFound)
	}
	now := s.now(p.Now)
	var out *ledger.ApprovalQuestion
	err := s.InTx(ctx, func(tx Tx) error {
		var err error
		out, err = scanQuestion(tx.QueryRow(ctx, `UPDATE approval_questions SET answered_at = $1
			WHERE nonce = $2 AND tenant = $3 AND operation_id = $4 AND tool = $5 AND fingerprint = $6
				AND answered_at IS NULL AND expires_at > $1
			RETURNING `+questionColumns,
			now, p.Nonce, p.Tenant, p.OperationID, p.Tool, p.Fingerprint))
		if err != nil {
			return s.notFound(err, "outstanding approval question")
		}
		return nil
	})
	return out, err
}
