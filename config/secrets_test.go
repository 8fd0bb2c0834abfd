package config

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckSecretsKey(t *testing.T) {
	const secretTool = "upstreams:\n  - name: up\n    url: http://127.0.0.1:1/mcp\n    tools:\n      pay:\n        consequential: true\n        secret_arguments: [token]\n"
	const plainTool = "upstreams:\n  - name: up\n    url: http://127.0.0.1:1/mcp\n    tools:\n      pay:\n        consequential: true\n"
	cases := []struct {
		name    string
		yaml    string
		haveKey bool
		refused bool
	}{
		{"secret tool, no key", secretTool, false, true},
		{"secret tool, a key", secretTool, true, false},
		{"secret tool, plaintext", secretTool + "secrets:\n  store: plaintext\n", false, false},
		{"secret tool, encrypted said", secretTool + "secrets:\n  store: encrypted\n", false, true},
		{"no secret tool, no key", plainTool, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse(strings.NewReader(c.yaml), "t.yaml", nil)
			if err != nil {
				t.Fatal(err)
			}
			err = cfg.CheckSecretsKey(c.haveKey)
			if !c.refused {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrNoSecretsKey) || !strings.Contains(err.Error(), "taskgate secrets-key create") || !strings.Contains(err.Error(), "up.pay") {
				t.Fatalf("err = %v; want ErrNoSecretsKey naming up.pay and how to create a key", err)
			}
		})
	}
}
