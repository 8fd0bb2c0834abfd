package ledger

import "time"

// SigningAlgorithm is the JWS algorithm a receipt-signing key signs with.
type SigningAlgorithm string

const (
	// SigningEdDSA is Ed25519 (RFC 8037), the default.
	SigningEdDSA SigningAlgorithm = "EdDSA"
	// SigningES256 is ECDSA over P-256 with SHA-256 (RFC 7518), cosign's
	// default algorithm.
	SigningES256 SigningAlgorithm = "ES256"
)

// Known reports whether receipts can be signed with a.
func (a SigningAlgorithm) Known() bool { return a == SigningEdDSA || a == SigningES256 }

// SigningKey is a key that signs receipts. The ledger holds its public key
// and, while it is active, its private key sealed under the gateway's
// secrets key ring; it never holds the private key in the clear. Retiring
// a key erases its sealed private key, so that it can never sign again,
// and keeps its public key, so that the receipts it signed still verify.
type SigningKey struct {
	ID int64
	// KeyID is the key's "kid": the RFC 7638 thumbprint of its public key,
	// unique in the ledger.
	KeyID     string
	Algorithm SigningAlgorithm
	// PublicKey is the raw public key: Ed25519's 32 bytes, or P-256's
	// uncompressed point (SEC 1, 65 bytes).
	PublicKey []byte
	// SealedPrivateKey is the private key (Ed25519's RFC 8032 seed, or
	// P-256's 32-byte scalar) sealed by secrets.Ring.SealBytes under a label naming KeyID; empty
	// once the key is retired.
	SealedPrivateKey string
	CreatedAt        time.Time
	RetiredAt        time.Time
}

// Active reports whether k may still sign: it is not retired and holds its
// private key.
func (k *SigningKey) Active() bool { return k.RetiredAt.IsZero() && k.SealedPrivateKey != "" }
