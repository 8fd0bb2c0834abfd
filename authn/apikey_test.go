package authn

import (
	"bytes"
	"context"
	"errors"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/taskgate/taskgate/ledger"
)

func errorsIsInvalid(err error) bool { return errors.Is(err, auth.ErrInvalidToken) }

func TestAPIKeyLifecycle(t *testing.T) {
	store, dbPath := newLedger(t)
	clock := newTestClock()
	a, err := New(&Options{Store: store, ResourceURL: testAudience, Clock: clock.Now})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx := t.Context()

	plaintext, key, err := NewAPIKey(ctx, store, "acme", "ci runner")
	if err != nil {
		t.Fatalf("NewAPIKey: %v", err)
	}
	if ok, _ := regexp.MatchString(`^tgk_[A-Z2-7]{52}$`, plaintext); !ok {
		t.Errorf("NewAPIKey plaintext = %q; want tgk_ followed by 52 base32 characters", plaintext)
	}
	if key.Tenant != "acme" || key.Label != "ci runner" || key.Hash != HashAPIKey(plaintext) {
		t.Errorf("NewAPIKey key = %+v; want tenant acme, label %q, hash of the plaintext", key, "ci runner")
	}
	other, _, err := NewAPIKey(ctx, store, "globex", "")
	if err != nil {
		t.Fatalf("NewAPIKey: %v", err)
	}
	if other == plaintext {
		t.Fatalf("two NewAPIKey calls gave the same plaintext")
	}

	t.Run("verify gives the tenant", func(t *testing.T) {
		ti, err := a.Verify(ctx, plaintext, nil)
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		if ti.UserID != "acme" || TenantOf(ti) != "acme" {
			t.Errorf("Verify UserID = %q, TenantOf = %q; want acme", ti.UserID, TenantOf(ti))
		}
		if got := ti.Extra[ExtraMethod]; got != MethodAPIKey {
			t.Errorf("Extra[method] = %v, want %q", got, MethodAPIKey)
		}
		if got := ti.Extra[ExtraKeyID]; got != key.ID {
			t.Errorf("Extra[key_id] = %v (%T), want %d", got, got, key.ID)
		}
		if !ti.Expiration.After(clock.Now().AddDate(10, 0, 0)) {
			t.Errorf("Expiration = %s; want far in the future", ti.Expiration)
		}
		ti2, err := a.Verify(ctx, other, nil)
		if err != nil || TenantOf(ti2) != "globex" {
			t.Errorf("Verify(other key) = %v, %v; want tenant globex", ti2, err)
		}
	})

	t.Run("rejections", func(t *testing.T) {
		unknown, _, err := NewAPIKey(ctx, store, "acme", "")
		if err != nil {
			t.Fatalf("NewAPIKey: %v", err)
		}
		// Flip one character: well formed, never issued.
		last := unknown[len(unknown)-1]
		flip := byte('A')
		if last == 'A' {
			flip = 'B'
		}
		unknown = unknown[:len(unknown)-1] + string(flip)
		tests := []struct {
			name, token, want string
		}{
			{"unknown key", unknown, "unknown or revoked"},
			{"lowercased key", strings.ToLower(plaintext), "malformed"},
			{"too short", "tgk_ABC", "malformed"},
			{"not base32", "tgk_" + strings.Repeat("1", 52), "malformed"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := a.Verify(ctx, tt.token, nil)
				if !errorsIsInvalid(err) {
					t.Fatalf("Verify() error = %v; want one that unwraps to auth.ErrInvalidToken", err)
				}
				if !strings.Contains(err.Error(), tt.want) {
					t.Errorf("Verify() error = %q; want it to say %q", err, tt.want)
				}
				if len(tt.token) > 8 && strings.Contains(err.Error(), tt.token[4:]) {
					t.Errorf("Verify() error %q echoes the key", err)
				}
			})
		}
	})

	t.Run("revoked key", func(t *testing.T) {
		if _, err := a.Verify(ctx, plaintext, nil); err != nil {
			t.Fatalf("Verify before revoking: %v", err)
		}
		if err := store.KeyRevoke(ctx, key.ID, clock.Now()); err != nil {
			t.Fatalf("KeyRevoke: %v", err)
		}
		// A key found in the ledger is trusted for apiKeyRecheck, and no
		// longer: the revocation takes effect once it is looked up again.
		clock.Advance(apiKeyRecheck / 2)
		if _, err := a.Verify(ctx, plaintext, nil); err != nil {
			t.Fatalf("Verify(revoked) within %s of its last lookup error = %v; want it still trusted", apiKeyRecheck, err)
		}
		clock.Advance(apiKeyRecheck / 2)
		_, err := a.Verify(ctx, plaintext, nil)
		if !errorsIsInvalid(err) {
			t.Fatalf("Verify(revoked) %s after its last lookup error = %v; want one that unwraps to auth.ErrInvalidToken", apiKeyRecheck, err)
		}
		if _, err := a.Verify(ctx, other, nil); err != nil {
			t.Errorf("Verify(other tenant's key) after revoking acme's: %v", err)
		}
	})

	t.Run("plaintext is not stored", func(t *testing.T) {
		keys, err := store.KeyList(ctx, "acme")
		if err != nil {
			t.Fatalf("KeyList: %v", err)
		}
		var found bool
		for _, k := range keys {
			if strings.Contains(k.Hash, plaintext) || strings.Contains(k.Label, plaintext) {
				t.Errorf("KeyList row %d holds the plaintext", k.ID)
			}
			if k.ID == key.ID {
				found = true
				if k.Hash != HashAPIKey(plaintext) {
					t.Errorf("KeyList hash = %q, want %q", k.Hash, HashAPIKey(plaintext))
				}
				if k.RevokedAt.IsZero() {
					t.Errorf("KeyList shows key %d unrevoked after KeyRevoke", k.ID)
				}
			}
		}
		if !found {
			t.Fatalf("KeyList(acme) = %d keys, none with ID %d", len(keys), key.ID)
		}
		// The database files (including the WAL) must hold the hash and
		// never the plaintext.
		var files []byte
		for _, p := range []string{dbPath, dbPath + "-wal"} {
			b, err := os.ReadFile(p)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("read %s: %v", p, err)
			}
			files = append(files, b...)
		}
		if !bytes.Contains(files, []byte(HashAPIKey(plaintext))) {
			t.Fatalf("the ledger files do not contain the key's hash; the scan below would prove nothing")
		}
		if bytes.Contains(files, []byte(plaintext)) || bytes.Contains(files, []byte(plaintext[len(APIKeyPrefix):])) {
			t.Errorf("the ledger files contain the plaintext API key")
		}
	})
}

func TestNewAPIKeyRejects(t *testing.T) {
	store, _ := newLedger(t)
	tests := []struct {
		name, tenant, want string
	}{
		{"empty tenant", "", "tenant is empty"},
		{"control characters", "acme\n", "control characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := NewAPIKey(t.Context(), store, tt.tenant, "")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewAPIKey(%q) error = %v; want it to contain %q", tt.tenant, err, tt.want)
			}
		})
	}
	if _, _, err := NewAPIKey(t.Context(), nil, "acme", ""); err == nil {
		t.Errorf("NewAPIKey(nil store) succeeded; want an error")
	}
}

func TestVerifyAPIKeyStoreFailureIsNotInvalidToken(t *testing.T) {
	store, _ := newLedger(t)
	a, err := New(&Options{Store: store, ResourceURL: testAudience})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	plaintext, _, err := NewAPIKey(t.Context(), store, "acme", "")
	if err != nil {
		t.Fatalf("NewAPIKey: %v", err)
	}
	if err := store.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	_, err = a.Verify(t.Context(), plaintext, nil)
	if err == nil || errorsIsInvalid(err) {
		t.Fatalf("Verify with a closed ledger = %v; want an error that is not auth.ErrInvalidToken (the key was not judged)", err)
	}
	if strings.Contains(err.Error(), plaintext) {
		t.Errorf("Verify error %q echoes the key", err)
	}
}

// unreachableLedger is a ledger whose key lookups fail while down is set,
// as when the database cannot be reached, or hang until their context
// ends while hung is set, as when the network stopped delivering.
type unreachableLedger struct {
	ledger.Store
	down, hung atomic.Bool
	lookups    atomic.Int64
}

func (u *unreachableLedger) KeyByHash(ctx context.Context, hash string) (*ledger.APIKey, error) {
	u.lookups.Add(1)
	switch {
	case u.hung.Load():
		<-ctx.Done()
		return nil, ctx.Err()
	case u.down.Load():
		return nil, errors.New("connection refused")
	}
	return u.Store.KeyByHash(ctx, hash)
}

// outageAuthenticator returns an authenticator on a ledger that a test can
// take down or hang, the ledger underneath it, and the authenticator's clock.
func outageAuthenticator(t *testing.T) (*Authenticator, ledger.Store, *unreachableLedger, *testClock) {
	t.Helper()
	inner, _ := newLedger(t)
	store := &unreachableLedger{Store: inner}
	clock := newTestClock()
	a, err := New(&Options{Store: store, ResourceURL: testAudience, Clock: clock.Now})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a, inner, store, clock
}

// A ledger that hangs does not hold up a request whose key is known: the
// lookup gives up after apiKeyLookupWait, and the next one is put off.
func TestVerifyAPIKeyLedgerHangs(t *testing.T) {
	a, inner, store, clock := outageAuthenticator(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	key, _, err := NewAPIKey(ctx, inner, "acme", "")
	if err != nil {
		t.Fatalf("NewAPIKey: %v", err)
	}
	if _, err := a.Verify(ctx, key, nil); err != nil {
		t.Fatalf("Verify before the ledger hangs: %v", err)
	}
	store.hung.Store(true)
	clock.Advance(apiKeyRecheck)
	before := store.lookups.Load()
	start := time.Now()
	if _, err := a.Verify(ctx, key, nil); err != nil {
		t.Fatalf("Verify(known key) with the ledger hanging: %v", err)
	}
	if took := time.Since(start); took > 3*apiKeyLookupWait {
		t.Errorf("Verify(known key) with the ledger hanging took %s; want about %s", took, apiKeyLookupWait)
	}
	if _, err := a.Verify(ctx, key, nil); err != nil {
		t.Fatalf("Verify(known key) again: %v", err)
	}
	if n := store.lookups.Load() - before; n != 1 {
		t.Errorf("two Verify calls within %s of a failed lookup looked the key up %d times; want once", apiKeyRecheck, n)
	}
}

// While the ledger cannot be reached, a key it had is trusted for a while
// (pass-through calls must keep working), one it no longer had is not, and
// one never seen cannot be judged.
func TestVerifyAPIKeyLedgerOutage(t *testing.T) {
	a, inner, store, clock := outageAuthenticator(t)
	ctx := t.Context()
	known, _, err := NewAPIKey(ctx, inner, "acme", "")
	if err != nil {
		t.Fatalf("NewAPIKey: %v", err)
	}
	revoked, rkey, err := NewAPIKey(ctx, inner, "acme", "")
	if err != nil {
		t.Fatalf("NewAPIKey: %v", err)
	}
	unseen, _, err := NewAPIKey(ctx, inner, "acme", "")
	if err != nil {
		t.Fatalf("NewAPIKey: %v", err)
	}
	for _, k := range []string{known, revoked} {
		if _, err := a.Verify(ctx, k, nil); err != nil {
			t.Fatalf("Verify before the outage: %v", err)
		}
	}
	if err := inner.KeyRevoke(ctx, rkey.ID, clock.Now()); err != nil {
		t.Fatalf("KeyRevoke: %v", err)
	}
	clock.Advance(apiKeyRecheck)
	if _, err := a.Verify(ctx, revoked, nil); !errorsIsInvalid(err) {
		t.Fatalf("Verify(revoked) = %v; want auth.ErrInvalidToken", err)
	}

	store.down.Store(true)
	clock.Advance(apiKeyOutageGrace / 2)
	if ti, err := a.Verify(ctx, known, nil); err != nil || TenantOf(ti) != "acme" {
		t.Errorf("Verify(known key) %s into an outage = %v, %v; want it trusted as tenant acme", apiKeyOutageGrace/2, ti, err)
	}
	if _, err := a.Verify(ctx, revoked, nil); err == nil {
		t.Errorf("Verify(revoked key) during an outage succeeded; a key the ledger no longer had must stay refused")
	}
	if _, err := a.Verify(ctx, unseen, nil); err == nil || errorsIsInvalid(err) {
		t.Errorf("Verify(never looked-up key) during an outage = %v; want an error that is not auth.ErrInvalidToken", err)
	}
	clock.Advance(apiKeyOutageGrace / 2)
	if _, err := a.Verify(ctx, known, nil); err == nil || errorsIsInvalid(err) {
		t.Errorf("Verify(known key) %s after its last lookup, the ledger still down = %v; want an error that is not auth.ErrInvalidToken", apiKeyOutageGrace, err)
	}

	store.down.Store(false)
	if _, err := a.Verify(ctx, known, nil); err != nil {
		t.Errorf("Verify(known key) once the ledger is back: %v", err)
	}
}

// An approver's key decides spend, so an outage never stretches the trust
// in its last lookup.
func TestVerifyApproverKeyLedgerOutage(t *testing.T) {
	a, inner, store, clock := outageAuthenticator(t)
	ctx := t.Context()
	approver, _, err := NewAPIKeyWithRole(ctx, inner, "acme", "", ledger.RoleApprover)
	if err != nil {
		t.Fatalf("NewAPIKeyWithRole: %v", err)
	}
	if _, err := a.Verify(ctx, approver, nil); err != nil {
		t.Fatalf("Verify before the outage: %v", err)
	}
	store.down.Store(true)
	clock.Advance(apiKeyRecheck)
	if _, err := a.Verify(ctx, approver, nil); err == nil || errorsIsInvalid(err) {
		t.Errorf("Verify(approver key) during an outage = %v; want an error that is not auth.ErrInvalidToken", err)
	}
}

// A lookup that began before the ledger answered that a key is gone cannot
// bring the key back when it returns late; one that began after can.
func TestCheckedKeysLateLookup(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	key := &ledger.APIKey{ID: 1, Tenant: "acme"}
	tests := []struct {
		name    string
		started time.Time
		want    bool
	}{
		{"began before the key was found gone", t0.Add(-time.Millisecond), false},
		{"began as the key was found gone", t0, false},
		{"began after", t0.Add(time.Millisecond), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c checkedKeys
			c.forget("h", t0)
			c.put("h", key, tt.started)
			if got := c.fresh("h", tt.started) != nil; got != tt.want {
				t.Errorf("key held after the late lookup = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestHashAPIKey(t *testing.T) {
	// SHA-256("abc") from FIPS 180-2, appendix B.1.
	const want = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if got := HashAPIKey("abc"); got != want {
		t.Errorf("HashAPIKey(%q) = %s, want %s", "abc", got, want)
	}
}

func TestAPIKeyRoleGrantsApproveScope(t *testing.T) {
	store, _ := newLedger(t)
	a, err := New(&Options{Store: store, ResourceURL: testAudience})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx := t.Context()
	agent, _, err := NewAPIKey(ctx, store, "acme", "agent")
	if err != nil {
		t.Fatal(err)
	}
	approver, key, err := NewAPIKeyWithRole(ctx, store, "acme", "reviewer", ledger.RoleApprover)
	if err != nil {
		t.Fatal(err)
	}
	if key.Role != ledger.RoleApprover {
		t.Errorf("NewAPIKeyWithRole key role = %q, want %q", key.Role, ledger.RoleApprover)
	}
	for _, tt := range []struct {
		name, token string
		want        bool
	}{{"agent key", agent, false}, {"approver key", approver, true}} {
		ti, err := a.Verify(ctx, tt.token, nil)
		if err != nil {
			t.Fatalf("%s: Verify: %v", tt.name, err)
		}
		if got := HasScope(ti, ScopeApprove); got != tt.want {
			t.Errorf("%s: HasScope(%q) = %v (scopes %v), want %v", tt.name, ScopeApprove, got, ti.Scopes, tt.want)
		}
	}
	if _, _, err := NewAPIKeyWithRole(ctx, store, "acme", "", "admin"); err == nil {
		t.Error("NewAPIKeyWithRole with role admin succeeded; want an error naming the roles")
	}
}
