package ledger

import (
	"encoding/json"
	"testing"

	"github.com/taskgate/taskgate/secrets"
)

func TestRedactSecrets(t *testing.T) {
	args := json.RawMessage(`{"filename":"a.txt","token":"s3cr3t","pin":1234}`)
	tests := []struct {
		name   string
		raw    string
		secret []string
		want   string
	}{
		{"nothing secret", `{"m":"s3cr3t"}`, nil, `{"m":"s3cr3t"}`},
		{"in a message", `{"confirm":{"method":"elicitation/create","params":{"message":"Delete with token s3cr3t?"}}}`, []string{"token"},
			`{"confirm":{"method":"elicitation/create","params":{"message":"Delete with token [redacted]?"}}}`},
		{"in an answer and a key", `{"s3cr3t":{"action":"accept","content":{"v":["x","s3cr3t"]}}}`, []string{"token"},
			`{"[redacted]":{"action":"accept","content":{"v":["x","[redacted]"]}}}`},
		{"a secret that is not a string is not searched", `{"m":"1234"}`, []string{"pin"}, `{"m":"1234"}`},
		{"an absent secret", `{"m":"a.txt"}`, []string{"missing"}, `{"m":"a.txt"}`},
		{"not JSON", `{"m":`, []string{"token"}, `"[redacted]"`},
	}
	for _, tt := range tests {
		got := RedactSecrets(json.RawMessage(tt.raw), args, tt.secret)
		if string(got) != tt.want {
			t.Errorf("%s: RedactSecrets = %s, want %s", tt.name, got, tt.want)
		}
	}
	sealed, err := secrets.ParseRing([]byte(secrets.NewKey()), "test")
	if err != nil {
		t.Fatal(err)
	}
	sealedArgs, err := sealed.Seal(args, []string{"token"}, secrets.Scope{Tenant: "acme", OperationID: "op-1", TaskID: "task-1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := RedactSecrets(json.RawMessage(`{"m":"s3cr3t"}`), sealedArgs, []string{"token"}); string(got) != `"[redacted]"` {
		t.Errorf("against a sealed secret: %s, want everything redacted", got)
	}
	if got := RedactSecrets(json.RawMessage(`{"m":"x"}`), json.RawMessage(`[]`), []string{"token"}); string(got) != `"[redacted]"` {
		t.Errorf("arguments that are not an object: %s, want everything redacted", got)
	}
}

func TestRedactSecretText(t *testing.T) {
	args := json.RawMessage(`{"token":"s3cr3t"}`)
	if got := RedactSecretText("the upstream asks: use s3cr3t?", args, []string{"token"}); got != "the upstream asks: use [redacted]?" {
		t.Errorf("RedactSecretText = %q", got)
	}
	if got := RedactSecretText("nothing to hide", args, nil); got != "nothing to hide" {
		t.Errorf("RedactSecretText without secrets = %q", got)
	}
}
