package authn

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func rsaKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatalf("generate RSA key: %v", err)
	}
	return k
}

func ecKey(t *testing.T, c elliptic.Curve) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(c, rand.Reader)
	if err != nil {
		t.Fatalf("generate EC key: %v", err)
	}
	return k
}

func TestJWTVerify(t *testing.T) {
	rsa1, stranger := rsaKey(t), rsaKey(t)
	ec1 := ecKey(t, elliptic.P256())
	is := newIssuer(t, rsaJWK("rsa-1", &rsa1.PublicKey), ecJWK(t, "ec-1", &ec1.PublicKey))
	clock := newTestClock()
	a := newJWTAuthenticator(t, is, clock)
	now := clock.Now()

	pubDER, err := x509.MarshalPKIXPublicKey(&rsa1.PublicKey)
	if err != nil {
		t.Fatalf("marshal public key: %v", err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	valid := claims(now, "acme", nil)
	edit := func(f func(jwt.MapClaims)) jwt.MapClaims { return claims(now, "acme", f) }

	tests := []struct {
		name       string
		token      string
		wantTenant string // set for tokens that must verify
		wantErr    error  // a jwt sentinel the rejection must unwrap to, if any
		wantMsg    string // text the rejection must contain, if any
	}{
		{name: "RSA", token: sign(t, jwt.SigningMethodRS256, rsa1, "rsa-1", valid), wantTenant: "acme"},
		{name: "EC P-256", token: sign(t, jwt.SigningMethodES256, ec1, "ec-1", valid), wantTenant: "acme"},
		{name: "no kid", token: sign(t, jwt.SigningMethodRS256, rsa1, "", valid), wantTenant: "acme"},
		{name: "audience among several", token: sign(t, jwt.SigningMethodRS256, rsa1, "rsa-1", edit(func(c jwt.MapClaims) {
			c["aud"] = []string{"https://other.example.com", testAudience}
		})), wantTenant: "acme"},
		{name: "expired within leeway", token: sign(t, jwt.SigningMethodES256, ec1, "ec-1", edit(func(c jwt.MapClaims) {
			c["iat"], c["nbf"], c["exp"] = now.Add(-time.Hour).Unix(), now.Add(-time.Hour).Unix(), now.Add(-10*time.Second).Unix()
		})), wantTenant: "acme"},
		{name: "expired", token: sign(t, jwt.SigningMethodRS256, rsa1, "rsa-1", edit(func(c jwt.MapClaims) {
			c["iat"], c["nbf"], c["exp"] = now.Add(-time.Hour).Unix(), now.Add(-time.Hour).Unix(), now.Add(-time.Minute).Unix()
		})), wantErr: jwt.ErrTokenExpired},
		{name: "not yet valid", token: sign(t, jwt.SigningMethodRS256, rsa1, "rsa-1", edit(func(c jwt.MapClaims) {
			c["nbf"] = now.Add(2 * time.Minute).Unix()
		})), wantErr: jwt.ErrTokenNotValidYet},
		{name: "issued in the future", token: sign(t, jwt.SigningMethodRS256, rsa1, "rsa-1", edit(func(c jwt.MapClaims) {
			c["iat"] = now.Add(2 * time.Minute).Unix()
		})), wantErr: jwt.ErrTokenUsedBeforeIssued},
		{name: "no exp", token: sign(t, jwt.SigningMethodRS256, rsa1, "rsa-1", edit(func(c jwt.MapClaims) {
			delete(c, "exp")
		})), wantErr: jwt.ErrTokenRequiredClaimMissing},
		{name: "wrong issuer", token: sign(t, jwt.SigningMethodRS256, rsa1, "rsa-1", edit(func(c jwt.MapClaims) {
			c["iss"] = "https://evil.example.com"
		})), wantErr: jwt.ErrTokenInvalidIssuer},
		{name: "issuer with trailing slash", token: sign(t, jwt.SigningMethodRS256, rsa1, "rsa-1", edit(func(c jwt.MapClaims) {
			c["iss"] = testIssuer + "/"
		})), wantErr: jwt.ErrTokenInvalidIssuer},
		{name: "wrong audience", token: sign(t, jwt.SigningMethodRS256, rsa1, "rsa-1", edit(func(c jwt.MapClaims) {
			c["aud"] = "https://other.example.com/mcp"
		})), wantErr: jwt.ErrTokenInvalidAudience},
		{name: "no audience", token: sign(t, jwt.SigningMethodRS256, rsa1, "rsa-1", edit(func(c jwt.MapClaims) {
			delete(c, "aud")
		})), wantErr: jwt.ErrTokenRequiredClaimMissing},
		{name: "alg none", token: sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "rsa-1", valid), wantErr: jwt.ErrTokenSignatureInvalid},
		{name: "HS256 keyed with the RSA public key PEM", token: sign(t, jwt.SigningMethodHS256, pubPEM, "rsa-1", valid), wantErr: jwt.ErrTokenSignatureInvalid},
		{name: "HS256 keyed with the RSA public key DER", token: sign(t, jwt.SigningMethodHS256, pubDER, "rsa-1", valid), wantErr: jwt.ErrTokenSignatureInvalid},
		{name: "RS384 not in the allowed list", token: sign(t, jwt.SigningMethodRS384, rsa1, "rsa-1", valid), wantErr: jwt.ErrTokenSignatureInvalid},
		{name: "signed by a stranger under a known kid", token: sign(t, jwt.SigningMethodRS256, stranger, "rsa-1", valid), wantErr: jwt.ErrTokenSignatureInvalid},
		{name: "signed by a stranger without kid", token: sign(t, jwt.SigningMethodRS256, stranger, "", valid), wantErr: jwt.ErrTokenSignatureInvalid},
		{name: "RSA signature under an EC kid", token: sign(t, jwt.SigningMethodRS256, rsa1, "ec-1", valid), wantErr: jwt.ErrTokenUnverifiable, wantMsg: "cannot verify a RS256"},
		{name: "kid not a string", token: func() string {
			tok := jwt.NewWithClaims(jwt.SigningMethodRS256, valid)
			tok.Header["kid"] = 5
			s, err := tok.SignedString(rsa1)
			if err != nil {
				t.Fatalf("sign: %v", err)
			}
			return s
		}(), wantErr: jwt.ErrTokenUnverifiable, wantMsg: "kid header is not a string"},
		{name: "no tenant claim", token: sign(t, jwt.SigningMethodRS256, rsa1, "rsa-1", edit(func(c jwt.MapClaims) {
			delete(c, "org")
		})), wantMsg: `no "org" claim`},
		{name: "tenant claim not a string", token: sign(t, jwt.SigningMethodRS256, rsa1, "rsa-1", edit(func(c jwt.MapClaims) {
			c["org"] = 42
		})), wantMsg: `"org" claim is not a string`},
		{name: "empty tenant claim", token: sign(t, jwt.SigningMethodRS256, rsa1, "rsa-1", edit(func(c jwt.MapClaims) {
			c["org"] = ""
		})), wantMsg: "tenant is empty"},
		{name: "garbage", token: "not.a.jwt", wantErr: jwt.ErrTokenMalformed},
		{name: "too long", token: strings.Repeat("a", maxJWTLen+1), wantMsg: "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ti, err := a.Verify(verifyCtx(t), tt.token, nil)
			if tt.wantTenant != "" {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				if ti.UserID != tt.wantTenant || TenantOf(ti) != tt.wantTenant {
					t.Errorf("Verify UserID = %q, TenantOf = %q; want %q", ti.UserID, TenantOf(ti), tt.wantTenant)
				}
				if ti.Extra[ExtraMethod] != MethodJWT {
					t.Errorf("Extra[method] = %v, want %q", ti.Extra[ExtraMethod], MethodJWT)
				}
				return
			}
			if !errorsIsInvalid(err) {
				t.Fatalf("Verify() = %v, %v; want an error that unwraps to auth.ErrInvalidToken", ti, err)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Verify() error = %q; want it to unwrap to %q", err, tt.wantErr)
			}
			if tt.wantMsg != "" && !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Verify() error = %q; want it to contain %q", err, tt.wantMsg)
			}
			if parts := strings.Split(tt.token, "."); len(parts) == 3 && len(parts[2]) > 8 && strings.Contains(err.Error(), parts[2]) {
				t.Errorf("Verify() error %q echoes the token", err)
			}
		})
	}
	// Every kid above was known, or named a key of the wrong kind: one
	// fetch served them all.
	if got := is.fetches.Load(); got != 1 {
		t.Errorf("JWKS fetched %d times, want 1", got)
	}
}

func TestJWTTokenInfo(t *testing.T) {
	ec1 := ecKey(t, elliptic.P256())
	is := newIssuer(t, ecJWK(t, "ec-1", &ec1.PublicKey))
	clock := newTestClock()
	a := newJWTAuthenticator(t, is, clock)
	c := claims(clock.Now(), "acme", nil)
	ti, err := a.Verify(verifyCtx(t), sign(t, jwt.SigningMethodES256, ec1, "ec-1", c), nil)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if want := clock.Now().Add(5 * time.Minute); !ti.Expiration.Equal(want) {
		t.Errorf("Expiration = %s, want the exp claim %s", ti.Expiration, want)
	}
	if want := []string{"tools:call", "tasks:read"}; !slices.Equal(ti.Scopes, want) {
		t.Errorf("Scopes = %v, want %v", ti.Scopes, want)
	}
	for k, want := range map[string]any{ExtraTenant: "acme", ExtraMethod: MethodJWT, ExtraKeyID: "ec-1", ExtraSubject: "user-acme"} {
		if got := ti.Extra[k]; got != want {
			t.Errorf("Extra[%q] = %v, want %v", k, got, want)
		}
	}

	// The tenant comes from the configured claim, not from sub.
	b, err := New(&Options{
		JWT:         &JWTOptions{Issuer: testIssuer, Audience: testAudience, JWKSURL: is.jwksURL(), Algorithms: []string{"ES256"}},
		ResourceURL: testAudience,
		Clock:       clock.Now,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ti, err = b.Verify(verifyCtx(t), sign(t, jwt.SigningMethodES256, ec1, "ec-1", c), nil)
	if err != nil {
		t.Fatalf("Verify with the default tenant claim: %v", err)
	}
	if got := TenantOf(ti); got != "user-acme" {
		t.Errorf("TenantOf with TenantClaim unset = %q, want the sub claim %q", got, "user-acme")
	}
}

func TestJWKSRotation(t *testing.T) {
	rsa1, rsa2 := rsaKey(t), rsaKey(t)
	is := newIssuer(t, rsaJWK("rsa-1", &rsa1.PublicKey))
	clock := newTestClock()
	a := newJWTAuthenticator(t, is, clock)
	verify := func(key *rsa.PrivateKey, kid string) error {
		t.Helper()
		_, err := a.Verify(verifyCtx(t), sign(t, jwt.SigningMethodRS256, key, kid, claims(clock.Now(), "acme", nil)), nil)
		return err
	}
	wantFetches := func(step string, want int64) {
		t.Helper()
		if got := is.fetches.Load(); got != want {
			t.Fatalf("%s: JWKS fetched %d times, want %d", step, got, want)
		}
	}

	if err := verify(rsa1, "rsa-1"); err != nil {
		t.Fatalf("verify rsa-1: %v", err)
	}
	if err := verify(rsa1, "rsa-1"); err != nil {
		t.Fatalf("verify rsa-1 again: %v", err)
	}
	wantFetches("cached kid", 1)

	// The issuer rotates to rsa-2. Within the refetch interval an unknown
	// kid does not reach the issuer.
	is.setKeys(rsaJWK("rsa-2", &rsa2.PublicKey))
	if err := verify(rsa2, "rsa-2"); !errorsIsInvalid(err) {
		t.Fatalf("verify rsa-2 right after a fetch = %v; want auth.ErrInvalidToken (refetch is rate-limited)", err)
	}
	wantFetches("unknown kid within the interval", 1)

	// After the interval, the unknown kid causes exactly one refetch, even
	// when many requests bring it at once.
	clock.Advance(jwksMinRefetch + time.Second)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = verify(rsa2, "rsa-2") })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("concurrent verify %d of rsa-2: %v", i, err)
		}
	}
	wantFetches("new kid after the interval", 2)

	// rsa-1 left the JWKS, so it no longer verifies.
	if err := verify(rsa1, "rsa-1"); !errorsIsInvalid(err) {
		t.Errorf("verify withdrawn rsa-1 = %v; want auth.ErrInvalidToken", err)
	}
	// A made-up kid is refused without another fetch.
	if err := verify(rsa1, "made-up"); !errorsIsInvalid(err) || !strings.Contains(err.Error(), `no key with kid "made-up"`) {
		t.Errorf("verify made-up kid = %v; want auth.ErrInvalidToken naming the kid", err)
	}
	wantFetches("unknown kids within the interval", 2)

	// Keys older than the maximum age are refetched by the next token.
	clock.Advance(jwksMaxAge)
	if err := verify(rsa2, "rsa-2"); err != nil {
		t.Fatalf("verify rsa-2 after max age: %v", err)
	}
	wantFetches("stale keys", 3)
}

func TestJWKSUnavailable(t *testing.T) {
	rsa1 := rsaKey(t)
	is := newIssuer(t, rsaJWK("rsa-1", &rsa1.PublicKey))
	is.setStatus(http.StatusServiceUnavailable)
	clock := newTestClock()
	a := newJWTAuthenticator(t, is, clock)
	token := sign(t, jwt.SigningMethodRS256, rsa1, "rsa-1", claims(clock.Now(), "acme", nil))

	_, err := a.Verify(verifyCtx(t), token, nil)
	if err == nil || errorsIsInvalid(err) || !errors.Is(err, errKeysUnavailable) {
		t.Fatalf("Verify with the JWKS down = %v; want errKeysUnavailable, not auth.ErrInvalidToken", err)
	}
	if !strings.Contains(err.Error(), "503") {
		t.Errorf("Verify error = %q; want it to name the HTTP status", err)
	}

	// Nothing was ever fetched, so the next token retries at once.
	is.setStatus(http.StatusOK)
	if _, err := a.Verify(verifyCtx(t), token, nil); err != nil {
		t.Fatalf("Verify after the JWKS recovered: %v", err)
	}

	// Once keys are cached, an outage at refetch time keeps them working.
	is.setStatus(http.StatusInternalServerError)
	clock.Advance(jwksMaxAge + time.Second)
	token = sign(t, jwt.SigningMethodRS256, rsa1, "rsa-1", claims(clock.Now(), "acme", nil))
	if _, err := a.Verify(verifyCtx(t), token, nil); err != nil {
		t.Fatalf("Verify with stale keys and the JWKS down: %v", err)
	}
	if got := is.fetches.Load(); got != 3 {
		t.Errorf("JWKS fetched %d times, want 3", got)
	}
}

func TestParseJWKS(t *testing.T) {
	rsa1 := rsaKey(t)
	ec256, ec384 := ecKey(t, elliptic.P256()), ecKey(t, elliptic.P384())
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatalf("generate small RSA key: %v", err)
	}
	with := func(k map[string]any, kv ...any) map[string]any {
		out := map[string]any{}
		for key, v := range k {
			out[key] = v
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(out, kv[i].(string))
			} else {
				out[kv[i].(string)] = kv[i+1]
			}
		}
		return out
	}
	good := rsaJWK("rsa", &rsa1.PublicKey)
	goodEC := ecJWK(t, "ec", &ec256.PublicKey)
	tests := []struct {
		name     string
		key      map[string]any
		wantKind keyKind // zero means the key must be skipped
		wantSkip string
	}{
		{"RSA", good, keyKind{kty: "RSA"}, ""},
		{"EC P-256", goodEC, keyKind{kty: "EC", crv: "P-256"}, ""},
		{"EC P-384", ecJWK(t, "ec384", &ec384.PublicKey), keyKind{kty: "EC", crv: "P-384"}, ""},
		{"RSA with padding", with(good, "e", "AQAB"), keyKind{kty: "RSA"}, ""},
		{"symmetric key", map[string]any{"kty": "oct", "kid": "k", "k": "c2VjcmV0"}, keyKind{}, `kty "oct"`},
		{"encryption key", with(good, "use", "enc"), keyKind{}, `use is "enc"`},
		{"key_ops without verify", with(good, "key_ops", []string{"encrypt"}), keyKind{}, "key_ops"},
		{"RSA with alg none", with(good, "alg", "none"), keyKind{}, `alg "none"`},
		{"RSA with alg HS256", with(good, "alg", "HS256"), keyKind{}, `alg "HS256"`},
		{"RSA with alg ES256", with(good, "alg", "ES256"), keyKind{}, "does not fit"},
		{"small RSA modulus", rsaJWK("small", &small.PublicKey), keyKind{}, "1024 bits"},
		{"even RSA exponent", with(good, "e", b64url([]byte{2})), keyKind{}, "exponent"},
		{"RSA without n", with(good, "n", nil), keyKind{}, "n is missing"},
		{"RSA n not base64url", with(good, "n", "!!!"), keyKind{}, "base64url"},
		{"EC point off the curve", with(goodEC, "y", goodEC["x"]), keyKind{}, "P-256 point"},
		{"EC coordinate too long", with(goodEC, "x", b64url(make([]byte, 33))), keyKind{}, "at most 32 bytes"},
		{"EC unknown curve", with(goodEC, "crv", "secp256k1"), keyKind{}, `crv "secp256k1"`},
		{"EC curve does not match coordinates", with(goodEC, "crv", "P-384"), keyKind{}, "P-384 point"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := mustJSON(t, map[string]any{"keys": []any{tt.key}})
			keys, skipped, err := parseJWKS(body)
			if err != nil {
				t.Fatalf("parseJWKS: %v", err)
			}
			if tt.wantKind == (keyKind{}) {
				if len(keys) != 0 || len(skipped) != 1 || !strings.Contains(skipped[0], tt.wantSkip) {
					t.Errorf("parseJWKS = %d keys, skipped %q; want the key skipped for %q", len(keys), skipped, tt.wantSkip)
				}
				return
			}
			if len(keys) != 1 || len(skipped) != 0 {
				t.Fatalf("parseJWKS = %d keys, skipped %q; want one key", len(keys), skipped)
			}
			if keys[0].kind != tt.wantKind {
				t.Errorf("key kind = %+v, want %+v", keys[0].kind, tt.wantKind)
			}
		})
	}

	t.Run("duplicate kid keeps the first", func(t *testing.T) {
		body := mustJSON(t, map[string]any{"keys": []any{good, with(goodEC, "kid", "rsa")}})
		keys, skipped, err := parseJWKS(body)
		if err != nil {
			t.Fatalf("parseJWKS: %v", err)
		}
		if len(keys) != 1 || keys[0].kind.kty != "RSA" || len(skipped) != 1 {
			t.Errorf("parseJWKS = %d keys, skipped %q; want the RSA key kept and the EC key skipped", len(keys), skipped)
		}
	})
	for _, body := range []string{`[]`, `{}`, `{"keys":`, `null`} {
		if _, _, err := parseJWKS([]byte(body)); err == nil {
			t.Errorf("parseJWKS(%s) succeeded; want an error", body)
		}
	}
}

func TestPublicKeyVerifies(t *testing.T) {
	tests := []struct {
		key  publicKey
		alg  string
		want bool
	}{
		{publicKey{kind: keyKind{kty: "RSA"}}, "RS256", true},
		{publicKey{kind: keyKind{kty: "RSA"}}, "PS512", true},
		{publicKey{kind: keyKind{kty: "RSA"}, alg: "RS256"}, "PS256", false},
		{publicKey{kind: keyKind{kty: "RSA"}}, "ES256", false},
		{publicKey{kind: keyKind{kty: "RSA"}}, "HS256", false},
		{publicKey{kind: keyKind{kty: "EC", crv: "P-256"}}, "ES256", true},
		{publicKey{kind: keyKind{kty: "EC", crv: "P-256"}}, "ES384", false},
		{publicKey{kind: keyKind{kty: "EC", crv: "P-521"}}, "ES512", true},
		{publicKey{kind: keyKind{kty: "EC", crv: "P-256"}}, "none", false},
	}
	for _, tt := range tests {
		if got := tt.key.verifies(tt.alg); got != tt.want {
			t.Errorf("%+v.verifies(%s) = %v, want %v", tt.key, tt.alg, got, tt.want)
		}
	}
}
