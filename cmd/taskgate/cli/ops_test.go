package cli

import (
	"encoding/json"
	"testing"
)

func TestRedactSecretArguments(t *testing.T) {
	got := redact(json.RawMessage(`{"suite":"x","token":"s3cret"}`), []string{"token"})
	if string(got) != `{"suite":"x","token":"[redacted]"}` {
		t.Fatalf("redact = %s", got)
	}
	if got := redact(json.RawMessage(`{"suite":"x"}`), nil); string(got) != `{"suite":"x"}` {
		t.Fatalf("redact without secrets = %s", got)
	}
}
