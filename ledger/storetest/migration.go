package storetest

import (
	"context"
	"slices"
	"testing"

	"github.com/taskgate/taskgate/ledger"
)

// AcceptedBefore00005 returns the SQL that writes two operations as a
// ledger before migration 00005 held them: their policy facts in accepted
// events. now is the dialect's literal for a creation time.
func AcceptedBefore00005(now string) []string {
	return []string{
		`INSERT INTO operations (id, tenant, operation_id, task_id, upstream, tool, fingerprint, arguments, state, created_at, updated_at)
			VALUES (1, 'acme', 'op-priced', 'task-1', 'hosted_test', 'run_suite', 'fp', '{}', 'completed', ` + now + `, ` + now + `),
			       (2, 'acme', 'op-plain', 'task-2', 'hosted_test', 'run_suite', 'fp', '{}', 'completed', ` + now + `, ` + now + `)`,
		`INSERT INTO events (operation_ref, kind, data, created_at) VALUES
			(1, 'accepted', '{"approval":0,"priced":true,"request_id":"req-1","secret_arguments":["token","key"]}', ` + now + `),
			(2, 'accepted', '{"approval":0,"priced":false,"request_id":"req-2"}', ` + now + `)`,
	}
}

// CheckAcceptancePolicyCopied checks, once migration 00005 has run over
// AcceptedBefore00005's operations, that their facts are on the operations.
func CheckAcceptancePolicyCopied(t *testing.T, s ledger.Store) {
	t.Helper()
	for _, want := range []struct {
		id     int64
		priced bool
		secret []string
	}{{1, true, []string{"token", "key"}}, {2, false, nil}} {
		op, err := s.OperationGet(context.Background(), &ledger.OperationGetParams{ID: want.id})
		if err != nil {
			t.Fatal(err)
		}
		if op.Priced != want.priced || !slices.Equal(op.SecretArguments, want.secret) {
			t.Errorf("operation %d: priced %v, secret %q; want %v, %q", want.id, op.Priced, op.SecretArguments, want.priced, want.secret)
		}
	}
}
