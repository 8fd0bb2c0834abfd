package authn

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

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
// valid until revoked, and is looked up again at least every apiKeyRecheck,
// so the value only has to satisfy go-sdk's requirement that a TokenInfo
// expires.
const apiKeyLifetimeYears = 100

// apiKeyRecheck is how long a key found in the ledger is trusted before it
// is looked up again: a revoked key stops working within this time. Every
// request looking its key up was a large share of a pass-through call's
// cost. Keys not found are looked up every time.
const apiKeyRecheck = time.Second

// apiKeyOutageGrace is how long after its last successful lookup a key
// stays trusted while the ledger cannot be reached. Pass-through calls do
// not need the ledger and must keep working through an outage; the price
// is that a key revoked meanwhile (through a replica that still reaches
// the ledger) keeps working here until the ledger answers again, for at
// most this long.
const apiKeyOutageGrace = 10 * time.Minute

// apiKeyLookupWait bounds the lookup of a key that is known from an
// earlier lookup: a ledger that does not answer within it counts as
// unreachable, and the request goes on with what is known rather than wait
// on it.
const apiKeyLookupWait = time.Second

// maxCheckedKeys bounds the keys held between lookups; beyond it they are
// all forgotten and looked up afresh.
const maxCheckedKeys = 4096

// checkedKeys holds the keys found in the ledger, by hash, with when they
// were last found there, and when keys were last found gone.
type checkedKeys struct {
	mu   sync.Mutex
	keys map[string]checkedKey
	// gone holds when the ledger answered that a key was unknown or
	// revoked, so that a lookup that began before then cannot bring the
	// key back when it returns late.
	gone map[string]time.Time
}

type checkedKey struct {
	key *ledger.APIKey
	// at is when the ledger last had the key; next is when it is to be
	// looked up again.
	at, next time.Time
}

// fresh returns the key with this hash unless it is due to be looked up.
func (c *checkedKeys) fresh(hash string, now time.Time) *ledger.APIKey {
	c.mu.Lock()
	defer c.mu.Unlock()
	k, ok := c.keys[hash]
	if !ok || !now.Before(k.next) {
		return nil
	}
	return k.key
}

// known returns the key with this hash if the ledger had it less than
// apiKeyOutageGrace ago.
func (c *checkedKeys) known(hash string, now time.Time) *ledger.APIKey {
	c.mu.Lock()
	defer c.mu.Unlock()
	k, ok := c.keys[hash]
	if !ok || !now.Before(k.at.Add(apiKeyOutageGrace)) {
		return nil
	}
	return k.key
}

// put records key as found by a lookup that began at started, unless the
// ledger has answered since then that the key is gone.
func (c *checkedKeys) put(hash string, key *ledger.APIKey, started time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if at, ok := c.gone[hash]; ok && !started.After(at) {
		return
	}
	if c.keys == nil || len(c.keys) >= maxCheckedKeys {
		c.keys = make(map[string]checkedKey)
	}
	c.keys[hash] = checkedKey{key: key, at: started, next: started.Add(apiKeyRecheck)}
}

// postpone puts the next lookup of a known key off by apiKeyRecheck as one
// begins, so that one request a key each recheck waits on the ledger, not
// every request that arrives meanwhile.
func (c *checkedKeys) postpone(hash string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if k, ok := c.keys[hash]; ok {
		k.next = now.Add(apiKeyRecheck)
		c.keys[hash] = k
	}
}

// forget drops a key the ledger answered at now that it no longer has
// (revoked), so that neither a later outage nor a lookup still under way
// can bring it back.
func (c *checkedKeys) forget(hash string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.keys, hash)
	if c.gone == nil || len(c.gone) >= maxCheckedKeys {
		c.gone = make(map[string]time.Time)
	}
	c.gone[hash] = now
}

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
	hash, now := HashAPIKey(token), a.clock()
	key := a.checked.fresh(hash, now)
	if key == nil {
		lookupCtx := ctx
		known := a.checked.known(hash, now)
		if known != nil && known.Role == ledger.RoleApprover {
			// An approver's key decides spend: it is never trusted on an
			// earlier lookup while the ledger is slow or away.
			known = nil
		}
		if known != nil {
			var cancel context.CancelFunc
			lookupCtx, cancel = context.WithTimeout(ctx, apiKeyLookupWait)
			defer cancel()
			// Requests that arrive during this lookup go on with the known
			// key rather than each wait on a lookup of their own.
			a.checked.postpone(hash, now)
		}
		found, err := a.store.KeyByHash(lookupCtx, hash)
		switch {
		case errors.Is(err, ledger.ErrNotFound):
			a.checked.forget(hash, a.clock())
			return nil, fmt.Errorf("%w: the API key is unknown or revoked", auth.ErrInvalidToken)
		case err != nil && known != nil && ctx.Err() == nil:
			// The ledger could not answer: a key it had a moment ago is
			// still trusted, for a while.
			a.log.WarnContext(ctx, "the ledger could not be asked about an API key; trusting its last lookup", "key_id", known.ID, "tenant", known.Tenant, "err", err)
			key = known
		case err != nil:
			return nil, fmt.Errorf("look up API key: %w", err)
		default:
			key = found
			a.checked.put(hash, key, now)
		}
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
		Expiration: now.AddDate(apiKeyLifetimeYears, 0, 0),
		Scopes:     scopes,
		Extra: map[string]any{
			ExtraTenant: key.Tenant,
			ExtraMethod: MethodAPIKey,
			ExtraKeyID:  key.ID,
		},
	}, nil
}
