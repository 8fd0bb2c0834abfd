package config

import (
	"errors"
	"fmt"
	"strings"
)

// SecretsStore says how the ledger keeps the values of secret arguments.
type SecretsStore string

const (
	// SecretsEncrypted seals them with a key of the configured key ring.
	SecretsEncrypted SecretsStore = "encrypted"
	// SecretsPlaintext keeps them as they came: anyone who reads the
	// ledger's database, a copy or a backup of it reads them.
	SecretsPlaintext SecretsStore = "plaintext"
)

// Secrets configures the data keys that seal secret arguments in the
// ledger.
type Secrets struct {
	// Store: "encrypted" (secret argument values are encrypted with
	// AES-256-GCM under the newest configured key before they are written)
	// or "plaintext" (kept as they came; the gateway warns at start).
	// Default encrypted: a consequential tool with secret_arguments then
	// needs a key, or the gateway refuses to start.
	Store SecretsStore `yaml:"store"`
	// KeyFile is the key file, as taskgate secrets-key create writes it:
	// one key per line, oldest first; the newest encrypts, every key
	// decrypts. It must be readable by its owner only. Unset: the keys are
	// read from the environment variable TASKGATE_SECRETS_KEYS, in the
	// same format.
	KeyFile string `yaml:"key_file"`
}

func (s *Secrets) validate(v *validator) {
	switch s.Store {
	case SecretsEncrypted, SecretsPlaintext:
	default:
		v.fail("secrets.store", "%q is not encrypted or plaintext", s.Store)
	}
	if s.Store == SecretsPlaintext && s.KeyFile != "" {
		v.fail("secrets.key_file", "is set but secrets.store is plaintext, so no key would be used; remove one of them")
	}
}

// SecretTools lists, as UPSTREAM.TOOL, the consequential tools that
// declare secret arguments.
func (c *Config) SecretTools() []string {
	var tools []string
	for _, u := range c.Upstreams {
		for name, t := range u.Tools {
			if t != nil && t.Consequential && len(t.SecretArguments) > 0 {
				tools = append(tools, u.Name+"."+name)
			}
		}
	}
	return tools
}

// ErrNoSecretsKey means tools declare secret arguments but no key is
// configured to encrypt them.
var ErrNoSecretsKey = errors.New("no secrets key is configured")

// CheckSecretsKey decides whether the gateway may start, given whether a
// secrets key is configured: a tool that declares secret arguments needs
// one, unless the configuration says secrets.store: plaintext.
func (c *Config) CheckSecretsKey(haveKey bool) error {
	tools := c.SecretTools()
	if haveKey || c.Secrets.Store == SecretsPlaintext || len(tools) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %w, but tools declare secret_arguments (%s), whose values the ledger keeps for a recovery; "+
		"create a key with taskgate secrets-key create --file taskgate.keys and set secrets.key_file: taskgate.keys "+
		"(or put the key in the environment variable TASKGATE_SECRETS_KEYS), or set secrets.store: plaintext to keep them unencrypted",
		c.File, ErrNoSecretsKey, strings.Join(tools, ", "))
}
