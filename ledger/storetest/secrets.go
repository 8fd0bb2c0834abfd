package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/secrets"
)

// SecretLedger is a store opened with a secrets key ring on a database,
// and what that database holds as a reader of its files or tables sees it.
type SecretLedger struct {
	Store ledger.Store
	DB    *sql.DB
	// Raw returns the database's contents as bytes: the SQLite file and
	// its WAL, or the text of every row of every PostgreSQL table.
	Raw func(t *testing.T) []byte
	// Checkpoint moves what the database has written into its main file
	// (SQLite: a truncating WAL checkpoint); nil where there is none.
	Checkpoint func(t *testing.T)
}

// SecretsFactory returns, for one fresh migrated database, a function that
// opens a store on it with the given ring (nil: no ring); each store is
// closed when the test ends.
type SecretsFactory func(t *testing.T) func(ring *secrets.Ring) SecretLedger

// ExerciseSecrets runs the secrets-at-rest contract: secret argument
// values are sealed before they are written, bound to their operation,
// resealed under the newest key, and erased once the operation ended.
func ExerciseSecrets(t *testing.T, newDB SecretsFactory) {
	t.Run("SealedAtRest", func(t *testing.T) { t.Parallel(); testSealedAtRest(t, newDB(t)) })
	t.Run("MovedCiphertext", func(t *testing.T) { t.Parallel(); testMovedCiphertext(t, newDB(t)) })
	t.Run("Reseal", func(t *testing.T) { t.Parallel(); testReseal(t, newDB(t)) })
}

func newRing(t *testing.T, keys ...string) *secrets.Ring {
	t.Helper()
	text := ""
	for _, k := range keys {
		text += k + "\n"
	}
	r, err := secrets.ParseRing([]byte(text), "test keys")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// liveToken is a secret no other test writes.
func liveToken() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "sk-live-" + hex.EncodeToString(b)
}

func secretCall(t *testing.T, key, token string) *ledger.AcceptParams {
	t.Helper()
	p := params(t, call{"acme", key, `{"suite":"settlement","token":"` + token + `"}`})
	p.SecretArguments = []string{"token"}
	return p
}

// secretValue is the stored value of op's token argument.
func secretValue(t *testing.T, op *ledger.Operation) string {
	t.Helper()
	var args map[string]string
	if err := json.Unmarshal(op.Arguments, &args); err != nil {
		t.Fatalf("stored arguments %s: %v", op.Arguments, err)
	}
	return args["token"]
}

func getOp(t *testing.T, s ledger.Store, id int64) *ledger.Operation {
	t.Helper()
	op, err := s.OperationGet(context.Background(), &ledger.OperationGetParams{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	return op
}

func testSealedAtRest(t *testing.T, open func(*secrets.Ring) SecretLedger) {
	ctx := context.Background()
	ring := newRing(t, secrets.NewKey())
	l := open(ring)
	// Long enough to spill out of its row's page: what an erasure frees
	// there must not keep the sealed value either.
	token := liveToken() + strings.Repeat("x", 6000)
	res := accept(t, l.Store, secretCall(t, "op-secret", token))
	if res.Decision != ledger.DecisionCreated {
		t.Fatalf("decision %s", res.Decision)
	}
	if raw := l.Raw(t); containsPiece(raw, token[:32]) {
		t.Fatal("the database holds the secret argument in plain text after acceptance")
	}
	op := getOp(t, l.Store, res.Operation.ID)
	sealed := secretValue(t, op)
	if op.SecretsAtRest != ledger.SecretsSealed || secrets.KeyOf(json.RawMessage(`"`+sealed+`"`)) != ring.Newest() {
		t.Fatalf("stored operation: secrets %q, token %q; want sealed under %s", op.SecretsAtRest, sealed, ring.Newest())
	}
	opened, err := ring.Open(op.Arguments, op.SecretArguments, op.SecretScope())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(opened, []byte(`"token":"`+token+`"`)) {
		t.Fatalf("opened arguments %s do not hold the token", opened)
	}

	// The fingerprint covers the real value: another token under the
	// same operation ID is different work, the same token a retry.
	if again := accept(t, l.Store, secretCall(t, "op-secret", liveToken())); again.Decision != ledger.DecisionConflict {
		t.Fatalf("another token under the same operation ID: %s, want conflict", again.Decision)
	}
	if again := accept(t, l.Store, secretCall(t, "op-secret", token)); again.Decision != ledger.DecisionAttached {
		t.Fatalf("the same token again: %s, want attached", again.Decision)
	}

	// Not erased while a re-send may need it.
	if _, err := l.Store.Transition(ctx, &ledger.TransitionParams{OperationRef: op.ID, To: ledger.StateSending, EraseSecrets: true}); !errors.Is(err, ledger.ErrStateChanged) {
		t.Fatalf("erasing the secrets of an operation being sent: %v, want ErrStateChanged", err)
	}
	if _, err := l.Store.Transition(ctx, &ledger.TransitionParams{OperationRef: op.ID, To: ledger.StateSending}); err != nil {
		t.Fatal(err)
	}
	ended, err := l.Store.Transition(ctx, &ledger.TransitionParams{OperationRef: op.ID, To: ledger.StateCompleted, Result: json.RawMessage(`{}`), EraseSecrets: true})
	if err != nil {
		t.Fatal(err)
	}
	if ended.SecretsAtRest != ledger.SecretsErased || secretValue(t, ended) != secrets.Redacted {
		t.Fatalf("after erasure: secrets %q, token %q; want erased, %q", ended.SecretsAtRest, secretValue(t, ended), secrets.Redacted)
	}
	if got := getOp(t, l.Store, op.ID); !bytes.Equal(got.Arguments, ended.Arguments) || !bytes.Contains(got.Arguments, []byte(`"suite":"settlement"`)) {
		t.Fatalf("stored arguments after erasure %s", got.Arguments)
	}
	if l.Checkpoint != nil {
		l.Checkpoint(t)
	}
	if containsPiece(l.Raw(t), sealed) {
		t.Fatal("the database still holds pieces of the secret argument's sealed value after erasure")
	}
}

// containsPiece reports whether raw holds any 32-byte piece of s: a long
// value is split over database pages, so it is never found whole.
func containsPiece(raw []byte, s string) bool {
	for i := 0; i+32 <= len(s); i += 32 {
		if bytes.Contains(raw, []byte(s[i:i+32])) {
			return true
		}
	}
	return false
}

func testMovedCiphertext(t *testing.T, open func(*secrets.Ring) SecretLedger) {
	ctx := context.Background()
	ring := newRing(t, secrets.NewKey())
	l := open(ring)
	a := accept(t, l.Store, secretCall(t, "op-a", liveToken())).Operation
	b := accept(t, l.Store, secretCall(t, "op-b", liveToken())).Operation
	if _, err := l.DB.ExecContext(ctx, `UPDATE operations SET arguments = (SELECT arguments FROM operations WHERE id = `+itoa(a.ID)+`) WHERE id = `+itoa(b.ID)); err != nil {
		t.Fatal(err)
	}
	moved := getOp(t, l.Store, b.ID)
	if _, err := ring.Open(moved.Arguments, moved.SecretArguments, moved.SecretScope()); !errors.Is(err, secrets.ErrOpen) {
		t.Fatalf("a sealed value moved to another operation opened: %v", err)
	}
	if _, err := ring.Open(a.Arguments, a.SecretArguments, a.SecretScope()); err != nil {
		t.Fatalf("the original does not open: %v", err)
	}
}

func testReseal(t *testing.T, open func(*secrets.Ring) SecretLedger) {
	ctx := context.Background()
	old, newer := secrets.NewKey(), secrets.NewKey()

	// Accepted without a key (secrets.store: plaintext): kept as it came,
	// and reported.
	plain := open(nil)
	token := liveToken()
	op := accept(t, plain.Store, secretCall(t, "op-plain", token)).Operation
	ended := accept(t, plain.Store, secretCall(t, "op-ended", liveToken())).Operation
	if op.SecretsAtRest != ledger.SecretsPlaintext || secretValue(t, op) != token {
		t.Fatalf("accepted without a key: secrets %q, token %q", op.SecretsAtRest, secretValue(t, op))
	}
	if _, err := plain.Store.Transition(ctx, &ledger.TransitionParams{OperationRef: ended.ID, To: ledger.StateCancelled, EraseSecrets: true}); err != nil {
		t.Fatal(err)
	}
	rep, err := plain.Store.SecretsReseal(ctx, nil)
	if err != nil || rep.Plaintext != 1 || rep.Resealed != 0 || len(rep.Sealed) != 0 {
		t.Fatalf("report without a key: %+v, %v; want one operation in plain text", rep, err)
	}

	// A key configured: the plaintext is sealed.
	first := newRing(t, old)
	l := open(first)
	rep, err = l.Store.SecretsReseal(ctx, nil)
	if err != nil || rep.Plaintext != 0 || rep.Resealed != 1 || rep.Sealed[first.Newest()] != 1 {
		t.Fatalf("reseal with a key: %+v, %v; want one operation sealed under %s", rep, err, first.Newest())
	}
	if l.Checkpoint != nil {
		l.Checkpoint(t)
	}
	if got := getOp(t, l.Store, op.ID); got.SecretsAtRest != ledger.SecretsSealed {
		t.Fatalf("after reseal: secrets %q", got.SecretsAtRest)
	}
	if _, err := first.Open(getOp(t, l.Store, op.ID).Arguments, op.SecretArguments, op.SecretScope()); err != nil {
		t.Fatal(err)
	}

	// Rotation: a newer key seals, the older still opens, and resealing
	// leaves nothing under the older key.
	rotated := newRing(t, old, newer)
	l = open(rotated)
	current := accept(t, l.Store, secretCall(t, "op-new", liveToken())).Operation
	if secrets.KeyOf(json.RawMessage(`"`+secretValue(t, current)+`"`)) != rotated.Newest() {
		t.Fatal("a new operation is not sealed under the newest key")
	}
	// Without Rotate, as a gateway starts, only plaintext is sealed: a
	// replica without the newest key could not open what is resealed.
	rep, err = l.Store.SecretsReseal(ctx, nil)
	if err != nil || rep.Resealed != 0 || rep.Sealed[rotated.Newest()] != 1 || rep.Sealed[first.Newest()] != 1 {
		t.Fatalf("reseal without rotating: %+v, %v; want one operation under each key", rep, err)
	}
	rep, err = l.Store.SecretsReseal(ctx, &ledger.SecretsResealParams{Rotate: true})
	if err != nil || rep.Resealed != 1 || rep.Sealed[rotated.Newest()] != 2 || rep.Sealed[first.Newest()] != 0 {
		t.Fatalf("reseal after rotation: %+v, %v; want one resealed, both under %s", rep, err, rotated.Newest())
	}
	only := newRing(t, newer)
	for _, o := range []*ledger.Operation{op, current} {
		got := getOp(t, l.Store, o.ID)
		if _, err := only.Open(got.Arguments, got.SecretArguments, got.SecretScope()); err != nil {
			t.Fatalf("operation %s does not open with the newest key alone: %v", o.OperationID, err)
		}
	}
	if got := getOp(t, l.Store, ended.ID); got.SecretsAtRest != ledger.SecretsErased {
		t.Fatalf("an erased operation became %q", got.SecretsAtRest)
	}

	// A value that does not open is left as it is and counted.
	lost := open(newRing(t, secrets.NewKey()))
	rep, err = lost.Store.SecretsReseal(ctx, &ledger.SecretsResealParams{Rotate: true})
	if err != nil || rep.Undecryptable != 2 || rep.Resealed != 0 {
		t.Fatalf("reseal with an unrelated key: %+v, %v; want two undecryptable", rep, err)
	}
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
