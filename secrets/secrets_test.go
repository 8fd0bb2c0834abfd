package secrets

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func ring(t *testing.T, keys ...string) *Ring {
	t.Helper()
	r, err := ParseRing([]byte(strings.Join(keys, "\n")), "test")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var scope = Scope{Tenant: "acme", OperationID: "op-1", TaskID: "task-1"}

func TestSealOpen(t *testing.T) {
	r := ring(t, NewKey())
	args := json.RawMessage(`{"suite":"s","token":"sk-live-123","n":{"a":1}}`)
	sealed, err := r.Seal(args, []string{"token", "n", "absent"}, scope)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(sealed), "sk-live-123") || strings.Contains(string(sealed), `"a"`) {
		t.Fatalf("sealed arguments hold plaintext: %s", sealed)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(sealed, &obj); err != nil {
		t.Fatal(err)
	}
	if string(obj["suite"]) != `"s"` || KeyOf(obj["token"]) != r.Newest() || KeyOf(obj["suite"]) != "" {
		t.Fatalf("sealed arguments %s: suite kept, token under key %s expected", sealed, r.Newest())
	}
	opened, err := r.Open(sealed, []string{"token", "n", "absent"}, scope)
	if err != nil {
		t.Fatal(err)
	}
	var got, want any
	_ = json.Unmarshal(opened, &got)
	_ = json.Unmarshal(args, &want)
	if gb, _ := json.Marshal(got); string(gb) != mustJSON(t, want) {
		t.Fatalf("opened %s, want %s", opened, args)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestOpenRefuses(t *testing.T) {
	a, b := NewKey(), NewKey()
	r := ring(t, a)
	sealed, err := r.Seal(json.RawMessage(`{"token":"sk","other":"x"}`), []string{"token"}, scope)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]json.RawMessage
	_ = json.Unmarshal(sealed, &obj)
	moved := json.RawMessage(`{"other":` + string(obj["token"]) + `}`)
	cases := []struct {
		name  string
		ring  *Ring
		args  json.RawMessage
		names []string
		scope Scope
		want  string
	}{
		{"another operation", r, sealed, []string{"token"}, Scope{Tenant: "acme", OperationID: "op-2", TaskID: "task-2"}, "sealed for another operation"},
		{"another tenant", r, sealed, []string{"token"}, Scope{Tenant: "other", OperationID: "op-1", TaskID: "task-1"}, "sealed for another operation"},
		{"another argument", r, moved, []string{"other"}, scope, "sealed for another operation"},
		{"unknown key", ring(t, b), sealed, []string{"token"}, scope, "not among the configured keys"},
		{"plaintext", r, json.RawMessage(`{"token":"sk"}`), []string{"token"}, scope, "not sealed"},
		{"damaged", r, json.RawMessage(`{"token":"tgs1.` + r.Newest() + `.!!"}`), []string{"token"}, scope, "damaged"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.ring.Open(c.args, c.names, c.scope)
			if !errors.Is(err, ErrOpen) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrOpen saying %q", err, c.want)
			}
		})
	}
}

func TestRotation(t *testing.T) {
	old, newer := NewKey(), NewKey()
	before := ring(t, old)
	sealed, err := before.Seal(json.RawMessage(`{"token":"sk"}`), []string{"token"}, scope)
	if err != nil {
		t.Fatal(err)
	}
	after := ring(t, old, newer)
	if after.Newest() == before.Newest() {
		t.Fatal("the newest key did not change")
	}
	if _, err := after.Open(sealed, []string{"token"}, scope); err != nil {
		t.Fatalf("a ring with the old key does not open what it sealed: %v", err)
	}
	resealed, err := after.Reseal(sealed, []string{"token"}, scope, false)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]json.RawMessage
	_ = json.Unmarshal(resealed, &obj)
	if KeyOf(obj["token"]) != after.Newest() {
		t.Fatalf("resealed under %s, want %s", KeyOf(obj["token"]), after.Newest())
	}
	if _, err := ring(t, newer).Open(resealed, []string{"token"}, scope); err != nil {
		t.Fatalf("the newest key alone does not open the resealed value: %v", err)
	}
	plain, err := after.Reseal(json.RawMessage(`{"token":"sk"}`), []string{"token"}, scope, true)
	if err != nil {
		t.Fatal(err)
	}
	if opened, err := ring(t, newer).Open(plain, []string{"token"}, scope); err != nil || string(opened) != `{"token":"sk"}` {
		t.Fatalf("a plaintext value resealed opens as %s, %v", opened, err)
	}
}

func TestErase(t *testing.T) {
	got, err := Erase(json.RawMessage(`{"token":"tgs1.abc.def","suite":"s"}`), []string{"token"})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != `{"suite":"s","token":"[redacted]"}` {
		t.Fatalf("erased = %s", got)
	}
}

func TestRingShowsNoKey(t *testing.T) {
	k := NewKey()
	r := ring(t, k)
	secret := strings.TrimPrefix(k, keyPrefix)
	for _, s := range []string{r.String(), r.LogValue().String()} {
		if strings.Contains(s, secret) || !strings.Contains(s, r.Newest()) {
			t.Fatalf("ring shows %q", s)
		}
	}
}

func TestParseRingErrors(t *testing.T) {
	k := NewKey()
	cases := map[string]string{
		"":                   "holds no key",
		"# only a comment\n": "holds no key",
		"sk-live":            "not a taskgate secrets key",
		"tgk1.short":         "32 bytes",
		k + "\n" + k:         "listed twice",
	}
	for text, want := range cases {
		if _, err := ParseRing([]byte(text), "keys"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseRing(%q) = %v, want an error saying %q", text, err, want)
		}
	}
}

func TestKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	id, err := CreateFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %s, want 0600", fi.Mode().Perm())
	}
	if _, err := CreateFile(path); err == nil || !strings.Contains(err.Error(), "not overwritten") {
		t.Fatalf("a second create: %v, want a refusal", err)
	}
	r, err := LoadFile(path)
	if err != nil || r.Newest() != id {
		t.Fatalf("load: %v, %v; want key %s", r, err, id)
	}
	id2, err := AddKey(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err = LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if ids := r.KeyIDs(); len(ids) != 2 || ids[0] != id || ids[1] != id2 {
		t.Fatalf("after add, keys %v; want [%s %s]", ids, id, id2)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("after add, mode %s", fi.Mode().Perm())
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a world-readable key file: %v, want a refusal", err)
	}
}

func TestNilRingShows(t *testing.T) {
	var r *Ring
	if s := r.LogValue().String(); s != "secrets.Ring(none)" {
		t.Fatalf("a nil ring shows %q", s)
	}
}
