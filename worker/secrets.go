package worker

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/secrets"
)

// arguments returns op's arguments as the provider must receive them: its
// sealed secret values opened with the key ring. They live only in this
// process's memory, never in the ledger or a log.
func (w *Worker) arguments(op *ledger.Operation) (json.RawMessage, error) {
	if op.SecretsAtRest != ledger.SecretsSealed {
		return op.Arguments, nil
	}
	if w.secrets == nil {
		return nil, fmt.Errorf("%w: they are encrypted and this gateway has no secrets key configured", secrets.ErrOpen)
	}
	return w.secrets.Open(op.Arguments, op.SecretArguments, op.SecretScope())
}

// opened is op with its arguments opened, for the work that calls the
// provider without holding the operation's lease.
func (w *Worker) opened(op *ledger.Operation) (*ledger.Operation, error) {
	args, err := w.arguments(op)
	if err != nil {
		return nil, fmt.Errorf("operation %s: %w", op.OperationID, err)
	}
	c := *op
	c.Arguments = args
	return &c, nil
}

// undecryptable stops work on an operation whose secret arguments did not
// open: nothing is sent with a value that is not the caller's, and a human
// decides. An operation that has ended or waits for review already is
// left as it is.
func (w *Worker) undecryptable(ctx context.Context, l *lease, cause error) error {
	if l.op.State.Terminal() || l.op.State == ledger.StateReview {
		w.logger(l.op).Warn("the secret arguments of an operation could not be decrypted", "err", cause)
		return nil
	}
	return w.review(ctx, l, ledger.ReasonSecretUndecryptable, fmt.Sprintf(
		"%v; nothing was sent. Configure the key that sealed them (secrets.key_file) and resolve the operation with --resend, or end it with --fail", cause))
}
