package secrets

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestSealBytes(t *testing.T) {
	old, newer := NewKey(), NewKey()
	r := ring(t, old)
	secret := []byte("an ed25519 seed of thirty-two b!")
	sealed := r.SealBytes(secret, "receipt signing key k1")
	if strings.Contains(sealed, "thirty-two") || !strings.HasPrefix(sealed, sealedPrefix) {
		t.Fatalf("sealed value %q holds the plaintext or lacks the format prefix", sealed)
	}
	if SealedWith(sealed) != r.Newest() || SealedWith("plain") != "" {
		t.Errorf("SealedWith(%q) = %q, want %s; SealedWith of plain text must be empty", sealed, SealedWith(sealed), r.Newest())
	}
	got, err := r.OpenBytes(sealed, "receipt signing key k1")
	if err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("OpenBytes = %q, %v; want the plaintext", got, err)
	}

	// A rotated ring seals under its newest key and still opens the old.
	rotated := ring(t, old, newer)
	if got, err := rotated.OpenBytes(sealed, "receipt signing key k1"); err != nil || !bytes.Equal(got, secret) {
		t.Errorf("a ring with a newer key opens %q, %v; want the plaintext", got, err)
	}
	if id := SealedWith(rotated.SealBytes(secret, "x")); id != rotated.Newest() || id == r.Newest() {
		t.Errorf("a rotated ring sealed under %s, want its newest key %s", id, rotated.Newest())
	}

	// changed differs from sealed in its last character.
	changed := sealed[:len(sealed)-1] + "A"
	if changed == sealed {
		changed = sealed[:len(sealed)-1] + "B"
	}
	for name, tc := range map[string]struct {
		ring   *Ring
		sealed string
		label  string
		want   string
	}{
		"another label":  {r, sealed, "receipt signing key k2", "another purpose"},
		"another ring":   {ring(t, newer), sealed, "receipt signing key k1", "which is not among the configured keys"},
		"changed":        {r, changed, "receipt signing key k1", "changed since"},
		"not sealed":     {r, "tgk1.nope", "receipt signing key k1", "not sealed"},
		"names no key":   {r, "tgs1.", "receipt signing key k1", "names no key"},
		"damaged base64": {r, "tgs1." + r.Newest() + ".!!", "receipt signing key k1", "damaged"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := tc.ring.OpenBytes(tc.sealed, tc.label)
			if !errors.Is(err, ErrOpenBytes) || errors.Is(err, ErrOpen) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("OpenBytes = %v; want ErrOpenBytes (not ErrOpen) saying %q", err, tc.want)
			}
		})
	}
}

// A value sealed as bytes does not open as a secret argument, nor the
// other way round: their associated data differ in kind.
func TestSealBytesApartFromArguments(t *testing.T) {
	r := ring(t, NewKey())
	asBytes, _ := json.Marshal(r.SealBytes([]byte(`"sk-live"`), "token"))
	args := json.RawMessage(`{"token":` + string(asBytes) + `}`)
	if _, err := r.Open(args, []string{"token"}, scope); !errors.Is(err, ErrOpen) {
		t.Errorf("a value sealed as bytes opened as a secret argument: %v", err)
	}
	sealedArgs, err := r.Seal(json.RawMessage(`{"token":"sk-live"}`), []string{"token"}, scope)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]string
	if err := json.Unmarshal(sealedArgs, &obj); err != nil {
		t.Fatal(err)
	}
	if _, err := r.OpenBytes(obj["token"], "token"); !errors.Is(err, ErrOpenBytes) {
		t.Errorf("a sealed secret argument opened as bytes: %v", err)
	}
}
