// Package receipttest holds what tests of signed statements share: a way
// to edit the statement inside a DSSE envelope while keeping its
// signature, as a forger would. It is imported by tests only, never by
// the gateway.
package receipttest

import (
	"encoding/base64"
	"encoding/json"
	"testing"
)

// EditStatement decodes the in-toto statement in the DSSE envelope env,
// lets edit change it, and encodes it back into the envelope, keeping the
// envelope's signatures: a verifier must refuse the result.
func EditStatement(t testing.TB, env []byte, edit func(st map[string]any)) []byte {
	t.Helper()
	var e map[string]any
	if err := json.Unmarshal(env, &e); err != nil {
		t.Fatal(err)
	}
	encoded, ok := e["payload"].(string)
	if !ok {
		t.Fatalf("the envelope has no payload string: %s", env)
	}
	payload, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(payload, &st); err != nil {
		t.Fatal(err)
	}
	edit(st)
	if payload, err = json.Marshal(st); err != nil {
		t.Fatal(err)
	}
	e["payload"] = base64.StdEncoding.EncodeToString(payload)
	out, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
