// Package signingkeys keeps the keys that sign receipts, Ed25519 (the
// default) or ECDSA P-256 (cosign's default algorithm): it
// creates them, seals their private parts with the gateway's secrets key
// ring, retires them, signs with the active one (receipts and review
// packets, as receipt/issue issues them), and publishes
// every public key, retired ones too, as a JWK Set (RFC 7517), served at
// [JWKSPath] and read back for offline verification.
//
// A private key is sealed with the same ring that seals secret arguments
// (secrets.key_file or TASKGATE_SECRETS_KEYS, DESIGN "Secrets"): one
// mechanism holds the gateway's data keys, rotated one way and never
// logged. The sealed value is bound to the key's kid, so it opens only as
// that key. The newest key that is not retired signs; retiring a key
// erases its sealed private part in the ledger, so it can never sign
// again, while its public key stays in the JWK Set and the receipts it
// signed still verify.
//
// This package must never log, print, return or store a private key in the
// clear: private keys exist unsealed only inside [CreateWith] and the
// Signer's methods that sign.
package signingkeys

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/taskgate/taskgate/internal/loopback"
	"github.com/taskgate/taskgate/ledger"
	"github.com/taskgate/taskgate/receipt"
	"github.com/taskgate/taskgate/secrets"
)

// JWKSPath is where the gateway serves the JWK Set of its receipt-signing
// keys, unauthenticated: public keys are for anyone who holds a receipt.
const JWKSPath = "/.well-known/taskgate-receipt-keys"

// MaxJWKSBytes bounds a JWK Set read by [ParseJWKS]'s callers from a file
// or URL.
const MaxJWKSBytes = 1 << 20

// ErrNoRing means a signing key cannot be sealed or opened because no
// secrets key is configured.
var ErrNoRing = errors.New("no secrets key is configured to encrypt and decrypt receipt-signing keys; set secrets.key_file (taskgate secrets-key create --file taskgate.keys) or " + secrets.EnvKeys)

// label binds a sealed private key to its key ID.
func label(kid string) string { return "receipt signing key " + kid }

// Algorithms are the names [ParseAlgorithm] takes, the default first.
var Algorithms = []string{"ed25519", "ecdsa-p256"}

// ParseAlgorithm returns the signing algorithm a name of [Algorithms]
// stands for.
func ParseAlgorithm(name string) (ledger.SigningAlgorithm, error) {
	switch strings.ToLower(name) {
	case "ed25519":
		return ledger.SigningEdDSA, nil
	case "ecdsa-p256":
		return ledger.SigningES256, nil
	}
	return "", fmt.Errorf("%q is not a receipt-signing algorithm; use %s", name, strings.Join(Algorithms, " or "))
}

// Create makes a new Ed25519 key, the default: [CreateWith] for
// [ledger.SigningEdDSA].
func Create(ctx context.Context, store ledger.Store, ring *secrets.Ring, now time.Time) (*ledger.SigningKey, error) {
	return CreateWith(ctx, store, ring, ledger.SigningEdDSA, now)
}

// CreateWith makes a new key for alg from crypto/rand, seals its private
// part with ring and records it in the ledger as created at now (zero: the
// store's clock). From then on it is the newest active key and signs
// receipts; older active keys stay active until retired.
func CreateWith(ctx context.Context, store ledger.Store, ring *secrets.Ring, alg ledger.SigningAlgorithm, now time.Time) (*ledger.SigningKey, error) {
	if ring == nil {
		return nil, fmt.Errorf("create a receipt-signing key: %w", ErrNoRing)
	}
	var (
		pub     crypto.PublicKey
		rawPub  []byte
		private []byte
	)
	switch alg {
	case ledger.SigningEdDSA:
		p, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("create a receipt-signing key: %w", err)
		}
		pub, rawPub, private = p, p, priv.Seed()
	case ledger.SigningES256:
		priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("create a receipt-signing key: %w", err)
		}
		if rawPub, err = priv.PublicKey.Bytes(); err != nil {
			return nil, fmt.Errorf("create a receipt-signing key: %w", err)
		}
		if private, err = priv.Bytes(); err != nil {
			return nil, fmt.Errorf("create a receipt-signing key: %w", err)
		}
		pub = &priv.PublicKey
	default:
		return nil, fmt.Errorf("create a receipt-signing key: algorithm %q is neither %s nor %s", alg, ledger.SigningEdDSA, ledger.SigningES256)
	}
	kid, err := receipt.KeyID(pub)
	if err != nil {
		return nil, err
	}
	k, err := store.SigningKeyCreate(ctx, &ledger.SigningKey{
		KeyID: kid, Algorithm: alg, PublicKey: rawPub,
		SealedPrivateKey: ring.SealBytes(private, label(kid)), CreatedAt: now,
	})
	if err != nil {
		return nil, fmt.Errorf("record the new receipt-signing key: %w", err)
	}
	return k, nil
}

// PublicKey returns k's public key as the crypto package holds it: an
// ed25519.PublicKey or an *ecdsa.PublicKey on P-256.
func PublicKey(k *ledger.SigningKey) (crypto.PublicKey, error) {
	switch k.Algorithm {
	case ledger.SigningEdDSA:
		if len(k.PublicKey) == ed25519.PublicKeySize {
			return ed25519.PublicKey(k.PublicKey), nil
		}
	case ledger.SigningES256:
		if pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), k.PublicKey); err == nil {
			return pub, nil
		}
	default:
		return nil, fmt.Errorf("receipt-signing key %s: algorithm %q is neither %s nor %s", k.KeyID, k.Algorithm, ledger.SigningEdDSA, ledger.SigningES256)
	}
	return nil, fmt.Errorf("receipt-signing key %s: its stored public key is not an %s public key", k.KeyID, k.Algorithm)
}

// Retire retires the key kid as of now (zero: the store's clock): the
// ledger erases its private part and keeps its public key.
func Retire(ctx context.Context, store ledger.Store, kid string, now time.Time) (*ledger.SigningKey, error) {
	k, err := store.SigningKeyRetire(ctx, kid, now)
	if err != nil {
		return nil, fmt.Errorf("retire receipt-signing key %s: %w", kid, err)
	}
	return k, nil
}

// Active returns the key that signs: the newest active one, nil when none.
func Active(keys []*ledger.SigningKey) *ledger.SigningKey {
	for i := len(keys) - 1; i >= 0; i-- {
		if keys[i].Active() {
			return keys[i]
		}
	}
	return nil
}

// SealedWith is the ID of the secrets key that seals k's private part, ""
// for a retired key.
func SealedWith(k *ledger.SigningKey) string { return secrets.SealedWith(k.SealedPrivateKey) }

// Signer signs receipts with the ledger's active key. It reads the key for
// every receipt, so a key created or retired on any replica applies to the
// next receipt. A nil *Signer signs nothing.
type Signer struct {
	store ledger.Store
	ring  *secrets.Ring
}

// NewSigner returns a Signer over store, opening keys with ring (nil when
// no secrets key is configured: a ledger with an active key then cannot
// sign, and says so).
func NewSigner(store ledger.Store, ring *secrets.Ring) *Signer {
	return &Signer{store: store, ring: ring}
}

// Sign signs r with the active key as signed at at and reports whether it
// did; without an active key it leaves r unsigned and returns false.
func (s *Signer) Sign(ctx context.Context, r *receipt.Receipt, at time.Time) (bool, error) {
	if s == nil {
		return false, nil
	}
	keys, err := s.store.SigningKeyList(ctx)
	if err != nil {
		return false, fmt.Errorf("read the receipt-signing keys: %w", err)
	}
	k := Active(keys)
	if k == nil {
		return false, nil
	}
	priv, err := s.open(k)
	if err != nil {
		return false, err
	}
	if err := receipt.Sign(r, priv, at); err != nil {
		return false, err
	}
	return true, nil
}

// Envelope signs an issued receipt's statement ([receipt.Statement]) with
// the active key as a DSSE envelope and returns it with the key's ID;
// without an active key it returns nil and signs nothing.
func (s *Signer) Envelope(ctx context.Context, statement []byte) ([]byte, string, error) {
	if s == nil {
		return nil, "", nil
	}
	keys, err := s.store.SigningKeyList(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("read the receipt-signing keys: %w", err)
	}
	k := Active(keys)
	if k == nil {
		return nil, "", nil
	}
	priv, err := s.open(k)
	if err != nil {
		return nil, "", err
	}
	env, err := receipt.Envelope(ctx, statement, priv, k.KeyID)
	if err != nil {
		return nil, "", err
	}
	return env, k.KeyID, nil
}

// Check returns the key ID of the key that signs receipts, "" when the
// ledger has no active key, and an error when that key cannot be opened.
func (s *Signer) Check(ctx context.Context) (string, error) {
	keys, err := s.store.SigningKeyList(ctx)
	if err != nil {
		return "", fmt.Errorf("read the receipt-signing keys: %w", err)
	}
	k := Active(keys)
	if k == nil {
		return "", nil
	}
	_, err = s.open(k)
	return k.KeyID, err
}

// open unseals k's private key and checks that it is k's.
func (s *Signer) open(k *ledger.SigningKey) (crypto.Signer, error) {
	if s.ring == nil {
		return nil, fmt.Errorf("receipt-signing key %s is encrypted with secrets key %s: %w", k.KeyID, SealedWith(k), ErrNoRing)
	}
	pub, err := PublicKey(k)
	if err != nil {
		return nil, err
	}
	raw, err := s.ring.OpenBytes(k.SealedPrivateKey, label(k.KeyID))
	if err != nil {
		return nil, fmt.Errorf("open receipt-signing key %s: %w", k.KeyID, err)
	}
	var priv crypto.Signer
	switch k.Algorithm {
	case ledger.SigningEdDSA:
		if len(raw) != ed25519.SeedSize {
			return nil, fmt.Errorf("open receipt-signing key %s: its private part is not an Ed25519 seed", k.KeyID)
		}
		priv = ed25519.NewKeyFromSeed(raw)
	case ledger.SigningES256:
		p, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), raw)
		if err != nil {
			return nil, fmt.Errorf("open receipt-signing key %s: its private part is not a P-256 private key", k.KeyID)
		}
		priv = p
	}
	if !priv.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(pub) {
		return nil, fmt.Errorf("open receipt-signing key %s: its private part does not belong to its public key", k.KeyID)
	}
	return priv, nil
}

// JWKS renders keys' public parts, retired ones included, oldest first, as
// a JWK Set: each an OKP Ed25519 key with "alg": "EdDSA" or an EC P-256
// key with "alg": "ES256", with its kid and "use": "sig".
func JWKS(keys []*ledger.SigningKey) ([]byte, error) {
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{}}
	for _, k := range keys {
		pub, err := PublicKey(k)
		if err != nil {
			return nil, err
		}
		set.Keys = append(set.Keys, jose.JSONWebKey{
			Key: pub, KeyID: k.KeyID, Algorithm: string(k.Algorithm), Use: "sig",
		})
	}
	b, err := json.MarshalIndent(set, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("render the receipt-signing keys as a JWK Set: %w", err)
	}
	return append(b, '\n'), nil
}

// PEM renders keys' public parts, oldest first, as PEM "PUBLIC KEY"
// blocks (PKIX, RFC 5280), each after a line naming its kid, which PEM
// readers skip: the form cosign's --key and openssl take. A reader that
// takes one key takes the first block.
func PEM(keys []*ledger.SigningKey) ([]byte, error) {
	var b bytes.Buffer
	for _, k := range keys {
		pub, err := PublicKey(k)
		if err != nil {
			return nil, err
		}
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			return nil, fmt.Errorf("render receipt-signing key %s as PEM: %w", k.KeyID, err)
		}
		status := "active"
		if !k.Active() {
			status = "retired"
		}
		fmt.Fprintf(&b, "# receipt-signing key %s (%s, %s)\n", k.KeyID, k.Algorithm, status)
		if err := pem.Encode(&b, &pem.Block{Type: "PUBLIC KEY", Bytes: der}); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}

// PublicKeys are keys' public parts, retired ones included, by key ID. A
// key whose stored public part cannot be read is left out, so nothing
// verifies as signed by it ([JWKS] and [PEM] name it).
func PublicKeys(keys []*ledger.SigningKey) receipt.PublicKeys {
	out := receipt.PublicKeys{}
	for _, k := range keys {
		if pub, err := PublicKey(k); err == nil {
			out[k.KeyID] = pub
		}
	}
	return out
}

// ParseJWKS reads a JWK Set of receipt-signing keys. It refuses a set with
// a key that is neither an Ed25519 nor an ECDSA P-256 public key, whose
// alg, when given, is not the one the key signs with, or whose kid is not
// the key's thumbprint ([receipt.KeyID]): a key listed under another's ID
// must never verify what that other key signed. source names the set in
// errors.
func ParseJWKS(b []byte, source string) (receipt.PublicKeys, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("%s is not a JWK Set: %w", source, err)
	}
	out := receipt.PublicKeys{}
	for i, k := range set.Keys {
		pub := k.Key
		alg, err := receipt.AlgorithmOf(pub)
		if err != nil || !k.IsPublic() {
			return nil, fmt.Errorf("%s: key %d (kid %q) is neither an Ed25519 nor an ECDSA P-256 public key; receipts are signed with those only", source, i, k.KeyID)
		}
		if k.Algorithm != "" && k.Algorithm != string(alg) {
			return nil, fmt.Errorf("%s: key %d (kid %q) says alg %q, but it is a key for %s", source, i, k.KeyID, k.Algorithm, alg)
		}
		kid, err := receipt.KeyID(pub)
		if err != nil {
			return nil, err
		}
		if k.KeyID != kid {
			return nil, fmt.Errorf("%s: key %d has kid %q, but its thumbprint is %s", source, i, k.KeyID, kid)
		}
		out[kid] = pub
	}
	return out, nil
}

// Handler serves store's JWK Set on GET and HEAD. A ledger that cannot be
// read is answered 503 and logged.
func Handler(store ledger.Store, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "use GET", http.StatusMethodNotAllowed)
			return
		}
		keys, err := store.SigningKeyList(r.Context())
		var body []byte
		if err == nil {
			body, err = JWKS(keys)
		}
		if err != nil {
			log.WarnContext(r.Context(), "could not serve the receipt-signing keys", "err", err)
			http.Error(w, "the receipt-signing keys cannot be read from the ledger now; try again", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/jwk-set+json")
		// A key created a moment ago must be found by the next verifier.
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			_, _ = io.Copy(w, bytes.NewReader(body))
		}
	})
}

// LoadJWKS reads the JWK Set at source: an http or https URL, fetched with
// client (nil: a client with a ten-second timeout), or a file.
func LoadJWKS(ctx context.Context, source string, client *http.Client) (receipt.PublicKeys, error) {
	var (
		b   []byte
		err error
	)
	if strings.HasPrefix(source, "http://") || strings.HasPrefix(source, "https://") {
		b, err = fetch(ctx, source, client)
	} else {
		b, err = readFile(source)
	}
	if err != nil {
		return nil, err
	}
	return ParseJWKS(b, source)
}

func fetch(ctx context.Context, raw string, client *http.Client) ([]byte, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("the JWK Set URL %q is not an absolute URL with a host", raw)
	}
	if u.Scheme == "http" && !loopback.Host(u.Hostname()) {
		// Keys fetched in the clear could be anyone's: a receipt signed with
		// a substituted key would verify.
		return nil, fmt.Errorf("the JWK Set URL %q uses http, which anyone on the way could answer with their own keys; use https (http is allowed only on a loopback host), or a file", raw)
	}
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch the JWK Set: %w", err)
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	res, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch the JWK Set: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch the JWK Set from %s: the server answered %s", raw, res.Status)
	}
	return readLimited(res.Body, raw)
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read the JWK Set: %w", err)
	}
	defer f.Close()
	return readLimited(f, path)
}

// readLimited reads at most MaxJWKSBytes, refusing more.
func readLimited(r io.Reader, source string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read the JWK Set from %s: %w", source, err)
	}
	if len(b) > MaxJWKSBytes {
		return nil, fmt.Errorf("the JWK Set at %s exceeds %d bytes; it is not a set of receipt-signing keys", source, MaxJWKSBytes)
	}
	return b, nil
}
