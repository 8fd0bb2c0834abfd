// Package secrets holds the gateway's data keys and what is done with them:
// the key ring read from a key file, authenticated encryption (AES-256-GCM)
// of the values of an operation's secret arguments and of other secrets the
// ledger keeps (the private parts of receipt-signing keys, [Ring.SealBytes]),
// and the erasure of secret arguments.
//
// A sealed value is the JSON string "tgs1.KEYID.DATA": the format version,
// the ID of the key that sealed it (so that a ring of several keys opens it
// after a rotation) and base64url(nonce || ciphertext). The associated data
// is the operation's identity (tenant, operation ID, task ID) and the
// argument's name, so a sealed value copied to another operation or another
// argument does not open. A value sealed by [Ring.SealBytes] has the same
// form; its associated data is a label of its own kind (for a signing key,
// its key ID), so that it opens neither as a secret argument nor under
// another label.
//
// This package must never log, print, return or format key material: a Ring
// shows only its key IDs, and errors name key IDs, never keys. It uses the
// standard library's cryptography only, and performs no I/O beyond reading
// and writing key files.
package secrets

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
)

// Redacted is what a secret value reads as once erased, and wherever it is
// shown.
const Redacted = "[redacted]"

// keyPrefix starts every key in a key file: the key format's version.
const keyPrefix = "tgk1."

// sealedPrefix starts every sealed value: the ciphertext format's version.
const sealedPrefix = "tgs1."

// ErrOpen means a sealed value did not open: its key is not in the ring, or
// it was sealed for another operation or argument, or it was changed.
var ErrOpen = errors.New("a secret argument could not be decrypted")

// ErrOpenBytes means a value sealed by [Ring.SealBytes] did not open: its
// key is not in the ring, or it was sealed under another label, or it was
// changed.
var ErrOpenBytes = errors.New("a sealed secret could not be decrypted")

// key is one data key; id is derived from it and safe to show.
type key struct {
	id   string
	aead cipher.AEAD
}

// Ring is the gateway's data keys, oldest first: the newest seals, any
// opens.
type Ring struct {
	keys []key
}

// NewKey returns a new key file line: a random 256-bit key from
// crypto/rand, in the key file format.
func NewKey() string {
	raw := make([]byte, 32)
	// crypto/rand.Read never fails; it panics if the system has no
	// randomness to give.
	_, _ = rand.Read(raw)
	return keyPrefix + base64.RawURLEncoding.EncodeToString(raw)
}

// ParseRing reads a key file's text: one key per line, oldest first;
// blank lines and lines starting with # are ignored. source names the file
// in errors.
func ParseRing(text []byte, source string) (*Ring, error) {
	r := &Ring{}
	seen := map[string]bool{}
	for i, line := range strings.Split(string(text), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := parseKey(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", source, i+1, err)
		}
		if seen[k.id] {
			return nil, fmt.Errorf("%s:%d: key %s is listed twice", source, i+1, k.id)
		}
		seen[k.id] = true
		r.keys = append(r.keys, k)
	}
	if len(r.keys) == 0 {
		return nil, fmt.Errorf("%s holds no key; create one with taskgate secrets-key create", source)
	}
	return r, nil
}

func parseKey(line string) (key, error) {
	enc, ok := strings.CutPrefix(line, keyPrefix)
	if !ok {
		return key{}, fmt.Errorf("not a taskgate secrets key (want a line starting %q, as taskgate secrets-key create writes)", keyPrefix)
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || len(raw) != 32 {
		return key{}, errors.New("a taskgate secrets key must be 32 bytes in unpadded base64url; create one with taskgate secrets-key create")
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return key{}, fmt.Errorf("use the key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return key{}, fmt.Errorf("use the key: %w", err)
	}
	// The ID is a hash of the key under a label of its own: it names the
	// key in sealed values without revealing anything of it.
	sum := sha256.Sum256(append([]byte("taskgate secrets key id\x00"), raw...))
	return key{id: hex.EncodeToString(sum[:6]), aead: aead}, nil
}

// KeyIDs lists the ring's key IDs, oldest first.
func (r *Ring) KeyIDs() []string {
	ids := make([]string, len(r.keys))
	for i, k := range r.keys {
		ids[i] = k.id
	}
	return ids
}

// Newest is the ID of the key that seals.
func (r *Ring) Newest() string { return r.keys[len(r.keys)-1].id }

// String shows the key IDs only, so that a ring printed by mistake
// reveals nothing.
func (r *Ring) String() string {
	if r == nil {
		return "secrets.Ring(none)"
	}
	return fmt.Sprintf("secrets.Ring%v", r.KeyIDs())
}

// LogValue implements slog.LogValuer with the key IDs only.
func (r *Ring) LogValue() slog.Value { return slog.StringValue(r.String()) }

// Scope is the operation a secret belongs to; it is bound into every
// sealed value as associated data.
type Scope struct {
	Tenant      string
	OperationID string
	TaskID      string
}

func (s Scope) associated(name string) []byte {
	b, _ := json.Marshal([]string{"taskgate secret argument v1", s.Tenant, s.OperationID, s.TaskID, name})
	return b
}

// seal encrypts plaintext under the newest key.
func (r *Ring) seal(plaintext, ad []byte) string {
	k := r.keys[len(r.keys)-1]
	nonce := make([]byte, k.aead.NonceSize(), k.aead.NonceSize()+len(plaintext)+k.aead.Overhead())
	_, _ = rand.Read(nonce)
	out := k.aead.Seal(nonce, nonce, plaintext, ad)
	return sealedPrefix + k.id + "." + base64.RawURLEncoding.EncodeToString(out)
}

// open decrypts a sealed value with whichever key of the ring sealed it;
// its errors wrap ErrOpen.
func (r *Ring) open(sealed string, ad []byte) ([]byte, error) {
	return r.openAs(sealed, ad, ErrOpen, "another operation or argument")
}

// openAs is open with the sentinel its errors wrap and what else a value
// may have been sealed for, as its error says.
func (r *Ring) openAs(sealed string, ad []byte, sentinel error, other string) ([]byte, error) {
	id, data, err := splitSealed(sealed, sentinel)
	if err != nil {
		return nil, err
	}
	for _, k := range r.keys {
		if k.id != id {
			continue
		}
		raw, err := base64.RawURLEncoding.DecodeString(data)
		if err != nil || len(raw) < k.aead.NonceSize() {
			return nil, fmt.Errorf("%w: the sealed value is damaged", sentinel)
		}
		pt, err := k.aead.Open(nil, raw[:k.aead.NonceSize()], raw[k.aead.NonceSize():], ad)
		if err != nil {
			return nil, fmt.Errorf("%w: it was sealed for %s, or changed since", sentinel, other)
		}
		return pt, nil
	}
	return nil, fmt.Errorf("%w: it was sealed with key %s, which is not among the configured keys %v", sentinel, id, r.KeyIDs())
}

// bytesAssociated is the associated data of a value SealBytes sealed under
// label; its first element keeps it apart from a secret argument's.
func bytesAssociated(label string) []byte {
	b, _ := json.Marshal([]string{"taskgate sealed secret v1", label})
	return b
}

// SealBytes encrypts plaintext under the newest key, bound to label (such
// as "receipt signing key KID"), and returns the sealed value in the
// "tgs1.KEYID.DATA" form. Only [Ring.OpenBytes] with the same label opens
// it.
func (r *Ring) SealBytes(plaintext []byte, label string) string {
	return r.seal(plaintext, bytesAssociated(label))
}

// OpenBytes decrypts a value SealBytes sealed under label, with whichever
// key of the ring sealed it. It fails, wrapping ErrOpenBytes, when that key
// is not in the ring, the value was sealed under another label, or it was
// changed.
func (r *Ring) OpenBytes(sealed, label string) ([]byte, error) {
	return r.openAs(sealed, bytesAssociated(label), ErrOpenBytes, "another purpose")
}

// SealedWith is the ID of the key that sealed a value SealBytes returned,
// "" if sealed is not such a value.
func SealedWith(sealed string) string {
	id, _, err := splitSealed(sealed, ErrOpenBytes)
	if err != nil {
		return ""
	}
	return id
}

// KeyOf is the ID of the key that sealed a value, "" if v is not a sealed
// value.
func KeyOf(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) != nil {
		return ""
	}
	return SealedWith(s)
}

func splitSealed(s string, sentinel error) (id, data string, err error) {
	rest, ok := strings.CutPrefix(s, sealedPrefix)
	if !ok {
		return "", "", fmt.Errorf("%w: the value is not sealed (want a string starting %q)", sentinel, sealedPrefix)
	}
	id, data, ok = strings.Cut(rest, ".")
	if !ok || id == "" {
		return "", "", fmt.Errorf("%w: the sealed value names no key", sentinel)
	}
	return id, data, nil
}

// Seal returns args with the value of each named argument sealed under the
// newest key; the other arguments are kept as they are. Named arguments
// that args does not hold are skipped.
func (r *Ring) Seal(args json.RawMessage, names []string, scope Scope) (json.RawMessage, error) {
	return rewrite(args, names, func(name string, v json.RawMessage) (json.RawMessage, error) {
		return json.Marshal(r.seal(v, scope.associated(name)))
	})
}

// Open returns args with each named argument's sealed value decrypted. It
// fails, wrapping ErrOpen, when any of them does not open.
func (r *Ring) Open(args json.RawMessage, names []string, scope Scope) (json.RawMessage, error) {
	return rewrite(args, names, func(name string, v json.RawMessage) (json.RawMessage, error) {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, fmt.Errorf("argument %q: %w: the value is not sealed", name, ErrOpen)
		}
		pt, err := r.open(s, scope.associated(name))
		if err != nil {
			return nil, fmt.Errorf("argument %q: %w", name, err)
		}
		return pt, nil
	})
}

// Reseal opens each named argument's value with whichever key sealed it
// and seals it again under the newest key. A value given in plaintext
// (written before a key was configured) is sealed as it is when plain is
// set.
func (r *Ring) Reseal(args json.RawMessage, names []string, scope Scope, plain bool) (json.RawMessage, error) {
	if plain {
		return r.Seal(args, names, scope)
	}
	opened, err := r.Open(args, names, scope)
	if err != nil {
		return nil, err
	}
	return r.Seal(opened, names, scope)
}

// Erase returns args with each named argument's value replaced by
// [Redacted]: what remains shows that a secret was passed, never its value.
func Erase(args json.RawMessage, names []string) (json.RawMessage, error) {
	redacted, _ := json.Marshal(Redacted)
	return rewrite(args, names, func(string, json.RawMessage) (json.RawMessage, error) { return redacted, nil })
}

// rewrite replaces the values of the named top-level arguments of the JSON
// object args with what fn makes of them.
func rewrite(args json.RawMessage, names []string, fn func(name string, v json.RawMessage) (json.RawMessage, error)) (json.RawMessage, error) {
	if len(names) == 0 || len(bytes.TrimSpace(args)) == 0 {
		return args, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil {
		return nil, fmt.Errorf("tool arguments are not a JSON object: %w", err)
	}
	changed := false
	for _, name := range names {
		v, ok := obj[name]
		if !ok {
			continue
		}
		nv, err := fn(name, v)
		if err != nil {
			return nil, err
		}
		obj[name] = nv
		changed = true
	}
	if !changed {
		return args, nil
	}
	return json.Marshal(obj)
}
