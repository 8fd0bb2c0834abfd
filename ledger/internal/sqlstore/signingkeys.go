package sqlstore

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/taskgate/taskgate/ledger"
)

const signingKeyColumns = `id, kid, algorithm, public_key, sealed_private_key, created_at, retired_at`

func scanSigningKey(r Row) (*ledger.SigningKey, error) {
	var (
		k      ledger.SigningKey
		alg    string
		pub    string
		sealed sql.NullString
	)
	if err := r.Scan(&k.ID, &k.KeyID, &alg, &pub, &sealed, ts{&k.CreatedAt}, ts{&k.RetiredAt}); err != nil {
		return nil, err
	}
	raw, err := base64.RawURLEncoding.DecodeString(pub)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: its stored public key is not base64url: %w", k.KeyID, err)
	}
	k.Algorithm, k.PublicKey, k.SealedPrivateKey = ledger.SigningAlgorithm(alg), raw, sealed.String
	return &k, nil
}

// SigningKeyCreate implements ledger.Store.
func (s *Store) SigningKeyCreate(ctx context.Context, k *ledger.SigningKey) (*ledger.SigningKey, error) {
	switch {
	case k.KeyID == "" || len(k.PublicKey) == 0:
		return nil, errors.New("signing key: a key ID and a public key are required")
	case !k.Algorithm.Known():
		return nil, fmt.Errorf("signing key %s: algorithm %q is neither %s nor %s, the ones receipts are signed with", k.KeyID, k.Algorithm, ledger.SigningEdDSA, ledger.SigningES256)
	case k.SealedPrivateKey == "":
		// The ledger never holds a private key in the clear, and a key
		// without one could never sign.
		return nil, fmt.Errorf("signing key %s: its sealed private key is required", k.KeyID)
	}
	var out *ledger.SigningKey
	err := s.InTx(ctx, func(tx Tx) error {
		var err error
		out, err = scanSigningKey(tx.QueryRow(ctx, `INSERT INTO signing_keys (kid, algorithm, public_key, sealed_private_key, created_at)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT (kid) DO NOTHING RETURNING `+signingKeyColumns,
			k.KeyID, string(k.Algorithm), base64.RawURLEncoding.EncodeToString(k.PublicKey), k.SealedPrivateKey, s.now(k.CreatedAt)))
		if errors.Is(s.drv.Interpret(err), ledger.ErrNotFound) {
			return fmt.Errorf("signing key %s is already in the ledger", k.KeyID)
		}
		return err
	})
	return out, err
}

// SigningKeyList implements ledger.Store.
func (s *Store) SigningKeyList(ctx context.Context) ([]*ledger.SigningKey, error) {
	return queryAll(ctx, s.drv.Reader(), scanSigningKey, `SELECT `+signingKeyColumns+` FROM signing_keys ORDER BY id`)
}

// SigningKeyRetire implements ledger.Store.
func (s *Store) SigningKeyRetire(ctx context.Context, keyID string, now time.Time) (*ledger.SigningKey, error) {
	var out *ledger.SigningKey
	err := s.InTx(ctx, func(tx Tx) error {
		var err error
		out, err = scanSigningKey(tx.QueryRow(ctx, `UPDATE signing_keys SET retired_at = COALESCE(retired_at, $1), sealed_private_key = NULL
			WHERE kid = $2 RETURNING `+signingKeyColumns, s.now(now), keyID))
		return s.notFound(err, "signing key "+keyID)
	})
	return out, err
}
