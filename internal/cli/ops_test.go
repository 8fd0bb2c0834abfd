package cli

import (
	"encoding/json"
	"testing"

	"github.com/taskgate/taskgate/ledger"
)

func TestRedactSecretArguments(t *testing.T) {
	evs := []*ledger.Event{{Kind: ledger.EventAccepted, Data: json.RawMessage(`{"priced":true,"secret_arguments":["token"]}`)}}
	got := redact(json.RawMessage(`{"suite":"x","token":"s3cret"}`), secretArguments(evs))
	if string(got) != `{"suite":"x","token":"[redacted]"}` {
		t.Fatalf("redact = %s", got)
	}
	if got := redact(json.RawMessage(`{"suite":"x"}`), nil); string(got) != `{"suite":"x"}` {
		t.Fatalf("redact without secrets = %s", got)
	}
}
