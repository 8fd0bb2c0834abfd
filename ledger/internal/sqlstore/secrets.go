package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/secrets"
)

// resealBatch is how many operations SecretsReseal reads at a time.
const resealBatch = 200

// SecretsReseal implements ledger.Store.
func (s *Store) SecretsReseal(ctx context.Context, p *ledger.SecretsResealParams) (*ledger.SecretsReport, error) {
	rotate := p != nil && p.Rotate
	rep := &ledger.SecretsReport{Sealed: map[string]int{}}
	var after int64
	for {
		ops, err := queryAll(ctx, s.drv.Reader(), scanOperation, `SELECT `+operationColumns+` FROM operations
			WHERE secrets_at_rest IN ($1, $2) AND id > $3 ORDER BY id LIMIT $4`,
			ledger.SecretsPlaintext, ledger.SecretsSealed, after, resealBatch)
		if err != nil {
			return nil, fmt.Errorf("list operations that hold secret arguments: %w", err)
		}
		for _, op := range ops {
			after = op.ID
			if s.ring != nil && stale(op, s.ring.Newest(), rotate) {
				resealed, err := s.reseal(ctx, op.ID, rotate)
				switch {
				case errors.Is(err, secrets.ErrOpen):
					// Left as it is: its recovery goes to review with the
					// reason, and a key added back to the ring opens it.
					s.log.WarnContext(ctx, "a secret argument could not be resealed", "operation_ref", op.ID, "operation_id", op.OperationID, "err", err)
					rep.Undecryptable++
				case err != nil:
					return nil, err
				case resealed != nil:
					op = resealed
					rep.Resealed++
				}
			}
			switch op.SecretsAtRest {
			case ledger.SecretsPlaintext:
				rep.Plaintext++
			case ledger.SecretsSealed:
				for _, id := range sealedUnder(op) {
					rep.Sealed[id]++
				}
			}
		}
		if len(ops) < resealBatch {
			return rep, nil
		}
	}
}

// reseal seals one operation's secret values under the newest key, in a
// transaction that holds the operation; nil if it no longer holds them.
func (s *Store) reseal(ctx context.Context, opRef int64, rotate bool) (*ledger.Operation, error) {
	var out *ledger.Operation
	err := s.InTx(ctx, func(tx Tx) error {
		op, err := s.operationByID(ctx, tx, opRef)
		if err != nil {
			return err
		}
		if !op.SecretsAtRest.Held() || !stale(op, s.ring.Newest(), rotate) {
			return nil
		}
		args, err := s.ring.Reseal(op.Arguments, op.SecretArguments, op.SecretScope(), op.SecretsAtRest == ledger.SecretsPlaintext)
		if err != nil {
			return fmt.Errorf("operation %d: %w", op.ID, err)
		}
		if _, err := tx.Exec(ctx, `UPDATE operations SET arguments = $1, secrets_at_rest = $2 WHERE id = $3`,
			string(args), ledger.SecretsSealed, op.ID); err != nil {
			return fmt.Errorf("reseal the secret arguments of operation %d: %w", op.ID, err)
		}
		op.Arguments, op.SecretsAtRest = args, ledger.SecretsSealed
		out = op
		return nil
	})
	return out, err
}

// stale reports whether op keeps a secret value in plain text or, when
// rotating, under a key other than newest.
func stale(op *ledger.Operation, newest string, rotate bool) bool {
	if op.SecretsAtRest == ledger.SecretsPlaintext {
		return true
	}
	if !rotate {
		return false
	}
	ids := sealedUnder(op)
	return len(ids) > 0 && !slices.Equal(ids, []string{newest})
}

// sealedUnder lists the IDs of the keys op's sealed values name, each once.
func sealedUnder(op *ledger.Operation) []string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(op.Arguments, &obj) != nil {
		return nil
	}
	var ids []string
	for _, name := range op.SecretArguments {
		if v, ok := obj[name]; ok {
			if id := secrets.KeyOf(v); id != "" && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	return ids
}
