package authn

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const (
	// jwksFetchTimeout bounds one JWKS fetch, however slow the issuer.
	jwksFetchTimeout = 10 * time.Second
	// jwksMinRefetch limits refetches caused by unknown kids, so that
	// tokens with made-up kids cannot make the gateway hammer the issuer.
	jwksMinRefetch = 30 * time.Second
	// jwksMaxAge is how long fetched keys are trusted before the next
	// verification refetches them, so that a key the issuer withdrew stops
	// verifying.
	jwksMaxAge = time.Hour
	// jwksMaxBytes bounds a JWKS document.
	jwksMaxBytes = 1 << 20
	// minRSABits is the smallest RSA modulus accepted (RFC 7518 §3.3).
	minRSABits = 2048
)

// errKeysUnavailable means the issuer's keys could not be fetched, so a
// token could not be checked; it is not the token's fault.
var errKeysUnavailable = errors.New("the issuer's signing keys are unavailable")

// publicKey is one usable signing key from a JWKS.
type publicKey struct {
	kid  string
	alg  string // the JWK's alg, "" if it named none
	kind keyKind
	key  any // *rsa.PublicKey or *ecdsa.PublicKey
}

// verifies reports whether k may verify a token signed with alg.
func (k *publicKey) verifies(alg string) bool {
	want, ok := keyKindFor(alg)
	return ok && want == k.kind && (k.alg == "" || k.alg == alg)
}

// keySet caches an issuer's JWKS by kid and refetches it when a token names
// an unknown kid (at most every jwksMinRefetch, unless nothing was ever
// fetched) or when the keys are older than jwksMaxAge.
type keySet struct {
	url    string
	client *http.Client
	clock  func() time.Time
	log    *slog.Logger

	// fetchMu serialises fetches, so that a burst of tokens with a new kid
	// causes one fetch.
	fetchMu sync.Mutex

	mu          sync.Mutex // guards the fields below
	keys        []*publicKey
	fetchedAt   time.Time // last successful fetch
	lastAttempt time.Time // last fetch, successful or not
	lastErr     error     // the last fetch's error
	gen         uint64    // counts fetches
}

func newKeySet(url string, client *http.Client, clock func() time.Time, log *slog.Logger) *keySet {
	return &keySet{url: url, client: client, clock: clock, log: log}
}

// match finds the keys for (kid, alg) in the cache: the key with that kid, or
// every key that fits alg when the token names no kid. It returns nil and no
// error if nothing matches, and an error if the kid names a key of the wrong
// kind. s.mu must be held.
func (s *keySet) match(kid, alg string) (any, error) {
	if kid != "" {
		i := slices.IndexFunc(s.keys, func(k *publicKey) bool { return k.kid == kid })
		if i < 0 {
			return nil, nil
		}
		if k := s.keys[i]; !k.verifies(alg) {
			return nil, fmt.Errorf("key %q is an %s key and cannot verify a %s signature", kid, k.describe(), alg)
		}
		return s.keys[i].key, nil
	}
	var set jwt.VerificationKeySet
	for _, k := range s.keys {
		if k.verifies(alg) {
			set.Keys = append(set.Keys, k.key)
		}
	}
	if len(set.Keys) == 0 {
		return nil, nil
	}
	return set, nil
}

// lookup returns the key (or, for a token without kid, the key set) to
// verify a token signed with alg by kid, fetching the JWKS when needed.
func (s *keySet) lookup(ctx context.Context, kid, alg string) (any, error) {
	now := s.clock()
	s.mu.Lock()
	key, err := s.match(kid, alg)
	fresh := !s.fetchedAt.IsZero() && now.Sub(s.fetchedAt) < jwksMaxAge
	mayFetch := s.fetchedAt.IsZero() || now.Sub(s.lastAttempt) >= jwksMinRefetch
	gen := s.gen
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if key != nil && (fresh || !mayFetch) {
		return key, nil
	}
	if key == nil && !mayFetch {
		return nil, s.unknown(kid, alg)
	}

	fetchErr := s.refresh(ctx, gen)
	s.mu.Lock()
	key, err = s.match(kid, alg)
	s.mu.Unlock()
	switch {
	case err != nil:
		return nil, err
	case key != nil:
		return key, nil
	case fetchErr != nil:
		return nil, fmt.Errorf("%w: %w", errKeysUnavailable, fetchErr)
	default:
		return nil, s.unknown(kid, alg)
	}
}

func (s *keySet) unknown(kid, alg string) error {
	if kid == "" {
		return fmt.Errorf("the token names no kid and no key in the issuer's JWKS verifies %s", alg)
	}
	return fmt.Errorf("no key with kid %q in the issuer's JWKS", kid)
}

// refresh fetches the JWKS unless another fetch finished since the caller
// read gen, and returns the error of whichever fetch it relied on. Failed
// fetches keep the keys already cached.
func (s *keySet) refresh(ctx context.Context, gen uint64) error {
	s.fetchMu.Lock()
	defer s.fetchMu.Unlock()
	s.mu.Lock()
	if s.gen != gen {
		err := s.lastErr
		s.mu.Unlock()
		return err
	}
	s.mu.Unlock()

	// A caller that gives up must not abort the fetch for the callers
	// waiting behind it; the timeout still bounds it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), jwksFetchTimeout)
	defer cancel()
	keys, err := s.fetch(ctx)

	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	s.lastAttempt = s.clock()
	s.lastErr = err
	if err != nil {
		s.log.WarnContext(ctx, "could not fetch the issuer's JWKS; keeping the keys cached before", "jwks_url", s.url, "cached_keys", len(s.keys), "err", err)
		return err
	}
	s.keys = keys
	s.fetchedAt = s.lastAttempt
	s.log.InfoContext(ctx, "fetched the issuer's JWKS", "jwks_url", s.url, "keys", len(keys))
	return nil
}

// fetch downloads and parses the JWKS.
func (s *keySet) fetch(ctx context.Context) ([]*publicKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch JWKS %s: %w", s.url, err)
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch JWKS: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch JWKS %s: HTTP status %s", s.url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, jwksMaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read JWKS %s: %w", s.url, err)
	}
	if len(body) > jwksMaxBytes {
		return nil, fmt.Errorf("JWKS %s is larger than %d bytes", s.url, jwksMaxBytes)
	}
	keys, skipped, err := parseJWKS(body)
	if err != nil {
		return nil, fmt.Errorf("JWKS %s: %w", s.url, err)
	}
	for _, why := range skipped {
		s.log.WarnContext(ctx, "ignoring a key in the issuer's JWKS", "jwks_url", s.url, "reason", why)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("JWKS %s has no usable RSA or EC signing key", s.url)
	}
	return keys, nil
}

// jwk is the part of an RFC 7517 JSON Web Key that authn reads.
type jwk struct {
	Kty    string   `json:"kty"`
	Kid    string   `json:"kid"`
	Use    string   `json:"use"`
	KeyOps []string `json:"key_ops"`
	Alg    string   `json:"alg"`
	N      string   `json:"n"`
	E      string   `json:"e"`
	Crv    string   `json:"crv"`
	X      string   `json:"x"`
	Y      string   `json:"y"`
}

// parseJWKS returns the usable signing keys of a JWK set, and why each other
// key was skipped. Symmetric keys (kty "oct") are never used.
func parseJWKS(body []byte) (keys []*publicKey, skipped []string, err error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, nil, fmt.Errorf("not a JWK set: %w", err)
	}
	if set.Keys == nil {
		return nil, nil, errors.New(`not a JWK set: no "keys" array`)
	}
	for i, raw := range set.Keys {
		var j jwk
		if err := json.Unmarshal(raw, &j); err != nil {
			skipped = append(skipped, fmt.Sprintf("keys[%d]: %v", i, err))
			continue
		}
		k, err := parseJWK(&j)
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("keys[%d] (kid %q): %v", i, j.Kid, err))
			continue
		}
		if k.kid != "" && slices.ContainsFunc(keys, func(o *publicKey) bool { return o.kid == k.kid }) {
			skipped = append(skipped, fmt.Sprintf("keys[%d]: kid %q is used by an earlier key", i, k.kid))
			continue
		}
		keys = append(keys, k)
	}
	return keys, skipped, nil
}

// parseJWK turns one JWK into a public key for signature verification.
func parseJWK(j *jwk) (*publicKey, error) {
	if j.Use != "" && j.Use != "sig" {
		return nil, fmt.Errorf("use is %q, not \"sig\"", j.Use)
	}
	if j.KeyOps != nil && !slices.Contains(j.KeyOps, "verify") {
		return nil, errors.New(`key_ops does not include "verify"`)
	}
	if j.Alg != "" {
		want, ok := keyKindFor(j.Alg)
		if !ok {
			return nil, fmt.Errorf("alg %q is not accepted", j.Alg)
		}
		if want.kty != j.Kty || (want.crv != "" && want.crv != j.Crv) {
			return nil, fmt.Errorf("alg %s does not fit a %s %s key", j.Alg, j.Kty, j.Crv)
		}
	}
	k := &publicKey{kid: j.Kid, alg: j.Alg}
	switch j.Kty {
	case "RSA":
		pub, err := parseRSA(j.N, j.E)
		if err != nil {
			return nil, err
		}
		k.kind, k.key = keyKind{kty: "RSA"}, pub
	case "EC":
		pub, err := parseEC(j.Crv, j.X, j.Y)
		if err != nil {
			return nil, err
		}
		k.kind, k.key = keyKind{kty: "EC", crv: j.Crv}, pub
	default:
		return nil, fmt.Errorf("kty %q is not supported (only RSA and EC)", j.Kty)
	}
	return k, nil
}

func (k *publicKey) describe() string {
	if k.kind.crv != "" {
		return k.kind.kty + " " + k.kind.crv
	}
	return k.kind.kty
}

// b64 decodes a base64url JWK member; padding is tolerated.
func b64(name, s string) ([]byte, error) {
	if s == "" {
		return nil, fmt.Errorf("%s is missing", name)
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return nil, fmt.Errorf("%s is not base64url: %w", name, err)
	}
	return b, nil
}

func parseRSA(n, e string) (*rsa.PublicKey, error) {
	nb, err := b64("n", n)
	if err != nil {
		return nil, err
	}
	eb, err := b64("e", e)
	if err != nil {
		return nil, err
	}
	mod := new(big.Int).SetBytes(nb)
	if mod.BitLen() < minRSABits {
		return nil, fmt.Errorf("RSA modulus has %d bits; at least %d are required", mod.BitLen(), minRSABits)
	}
	exp := new(big.Int).SetBytes(eb)
	if exp.BitLen() > 31 || exp.Int64() < 3 || exp.Bit(0) == 0 {
		return nil, errors.New("RSA exponent must be odd, at least 3 and below 2^31")
	}
	return &rsa.PublicKey{N: mod, E: int(exp.Int64())}, nil
}

func parseEC(crv, x, y string) (*ecdsa.PublicKey, error) {
	var curve elliptic.Curve
	switch crv {
	case "P-256":
		curve = elliptic.P256()
	case "P-384":
		curve = elliptic.P384()
	case "P-521":
		curve = elliptic.P521()
	default:
		return nil, fmt.Errorf("crv %q is not supported (P-256, P-384 or P-521)", crv)
	}
	size := (curve.Params().BitSize + 7) / 8
	xb, err := b64("x", x)
	if err != nil {
		return nil, err
	}
	yb, err := b64("y", y)
	if err != nil {
		return nil, err
	}
	if len(xb) > size || len(yb) > size {
		return nil, fmt.Errorf("x and y of a %s key must be at most %d bytes", crv, size)
	}
	// RFC 7518 §6.2.1.2 wants full-length coordinates; some issuers drop
	// leading zero bytes, which the point check below still catches if wrong.
	point := make([]byte, 1+2*size)
	point[0] = 4
	copy(point[1+size-len(xb):1+size], xb)
	copy(point[1+2*size-len(yb):], yb)
	pub, err := ecdsa.ParseUncompressedPublicKey(curve, point)
	if err != nil {
		return nil, fmt.Errorf("%s point: %w", crv, err)
	}
	return pub, nil
}
