package authn

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/taskgate/taskgate/ledger"
)

// APIKeyPrefix starts every taskgate API key, so that a key can be told
// from a JWT without a lookup and recognised by secret scanners.
const APIKeyPrefix = "tgk_"

// apiKeyBytes is the entropy of an API key.
const apiKeyBytes = 32

// apiKeyEncoding spells an API key's random bytes: base32 without padding.
func apiKeyEncoding() *base32.Encoding {
	return base32.StdEncoding.WithPadding(base32.NoPadding)
}

// apiKeyLifetimeYears sets the Expiration of an API key's TokenInfo. A key is
// valid until revoked, and every request looks it up again, so the value only
// has to satisfy go-sdk's requirement that a TokenInfo expires.
const apiKeyLifetimeYears = 100

// NewAPIKey creates an agent API key for tenant and records only its hash
// in s. The plaintext is returned once, to be shown to the user; it cannot be
// recovered later.
func NewAPIKey(ctx context.Context, s ledger.Store, tenant, label string) (plaintext string, key *ledger.APIKey, err error) {
	return NewAPIKeyWithRole(ctx, s, tenant, label, ledger.RoleAgent)
}

// NewAPIKeyWithRole is [NewAPIKey] for a key of the given role:
// ledger.RoleAgent, or ledger.RoleApprover for a key that may also create and
// revoke approvals (it carries [ScopeApprove]). Give approver keys to the
// humans who approve spend, never to the agents whose calls they approve.
func NewAPIKeyWithRole(ctx context.Context, s ledger.Store, tenant, label, role string) (plaintext string, key *ledger.APIKey, err error) {
	if s == nil {
		return "", nil, errors.New("create api key: no ledger store")
	}
	if err := checkTenant(tenant); err != nil {
		return "", nil, fmt.Errorf("create api key: %w", err)
	}
	if role != ledger.RoleAgent && role != ledger.RoleApprover {
		return "", nil, fmt.Errorf("create api key: role %q is not a role; use %s or %s", role, ledger.RoleAgent, ledger.RoleApprover)
	}
	var b [apiKeyBytes]byte
	// crypto/rand.Read never fails; it crashes the program if the system
	// cannot supply randomness.
	_, _ = rand.Read(b[:])
	plaintext = APIKeyPrefix + apiKeyEncoding().EncodeToString(b[:])
	key, err = s.KeyCreate(ctx, &ledger.APIKey{Tenant: tenant, Hash: HashAPIKey(plaintext), Label: label, Role: role})
	if err != nil {
		return "", nil, fmt.Errorf("create api key for tenant %q: %w", tenant, err)
	}
	return plaintext, key, nil
}

// HashAPIKey returns the lowercase hex SHA-256 of an API key, the only form
// in which a key is stored. A key has 256 random bits, so a fast unsalted
// hash is enough: there is nothing to guess.
func HashAPIKey(plaintext string) string {
	sum := sha256.Sum256([]byte(plaintext))
	return hex.EncodeToString(sum[:])
}

// wellFormedAPIKey reports whether token has the shape NewAPIKey gives, so
// that junk never reaches the ledger.
func wellFormedAPIKey(token string) bool {
	body := token[len(APIKeyPrefix):]
	b, err := apiKeyEncoding().DecodeString(body)
	return err == nil && len(b) == apiKeyBytes
}

func (a *Authenticator) verifyAPIKey(ctx context.Context, token string) (*auth.TokenInfo, error) {
	if !wellFormedAPIKey(token) {
		return nil, fmt.Errorf("%w: the API key is malformed (want %s followed by %d base32 characters)",
			auth.ErrInvalidToken, APIKeyPrefix, apiKeyEncoding().EncodedLen(apiKeyBytes))
	}
	key, err := a.store.KeyByHash(ctx, HashAPIKey(token))
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, fmt.Errorf("%w: the API key is unknown or revoked", auth.ErrInvalidToken)
	}
	if err != nil {
		return nil, fmt.Errorf("look up API key: %w", err)
	}
	if err := checkTenant(key.Tenant); err != nil {
		return nil, fmt.Errorf("%w: API key %d: %w", auth.ErrInvalidToken, key.ID, err)
	}
	var scopes []string
	if key.Role == ledger.RoleApprover {
		scopes = []string{ScopeApprove}
	}
	return &auth.TokenInfo{
		UserID:     key.Tenant,
		Expiration: a.clock().AddDate(apiKeyLifetimeYears, 0, 0),
		Scopes:     scopes,
		Extra: map[string]any{
			ExtraTenant: key.Tenant,
			ExtraMethod: MethodAPIKey,
			ExtraKeyID:  key.ID,
		},
	}, nil
}
