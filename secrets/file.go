package secrets

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// EnvKeys is the environment variable that holds the keys, in the key
// file's format, when no key file is configured.
const EnvKeys = "TASKGATE_SECRETS_KEYS"

// Load returns the configured ring: the key file's when keyFile is set,
// otherwise envKeys' (the value of [EnvKeys]) when set, otherwise nil.
func Load(keyFile, envKeys string) (*Ring, error) {
	switch {
	case keyFile != "":
		return LoadFile(keyFile)
	case envKeys != "":
		return ParseRing([]byte(envKeys), "$"+EnvKeys)
	default:
		return nil, nil
	}
}

// LoadFile reads a key file. It refuses one that others than its owner may
// read: the keys open every secret argument in the ledger.
func LoadFile(path string) (*Ring, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read the secrets key file: %w; create one with taskgate secrets-key create --file %s", err, path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("the secrets key file %s may be read by others (mode %s); restrict it with chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the secrets key file: %w", err)
	}
	return ParseRing(b, path)
}

// CreateFile writes a new key file holding one new key, readable by its
// owner only. It refuses to overwrite a file that exists. It returns the
// new key's ID.
func CreateFile(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("the secrets key file %s exists and is not overwritten (its keys may still be needed to open secret arguments); to add a newer key use taskgate secrets-key create --add", path)
	}
	if err != nil {
		return "", fmt.Errorf("create the secrets key file: %w", err)
	}
	k := NewKey()
	id, err := keyID(k)
	if err != nil {
		return "", err
	}
	text := fileHeader + keyComment(id) + k + "\n"
	if _, err := f.WriteString(text); err != nil {
		_ = f.Close()
		return "", fmt.Errorf("write the secrets key file: %w", err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return "", fmt.Errorf("write the secrets key file: %w", err)
	}
	return id, f.Close()
}

// AddKey appends a new key to an existing key file, making it the newest:
// gateways that load the file afterwards seal with it and still open what
// the older keys sealed. The file is replaced atomically. It returns the
// new key's ID.
func AddKey(path string) (string, error) {
	if _, err := LoadFile(path); err != nil {
		return "", err
	}
	old, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the secrets key file: %w", err)
	}
	k := NewKey()
	id, err := keyID(k)
	if err != nil {
		return "", err
	}
	text := string(old)
	if len(text) > 0 && text[len(text)-1] != '\n' {
		text += "\n"
	}
	text += keyComment(id) + k + "\n"
	tmp, err := os.CreateTemp(filepath.Dir(path), ".taskgate-secrets-*")
	if err != nil {
		return "", fmt.Errorf("add a key to the secrets key file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err == nil {
		if _, err = tmp.WriteString(text); err == nil {
			err = tmp.Sync()
		}
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return "", fmt.Errorf("add a key to the secrets key file: %w", err)
	}
	return id, nil
}

const fileHeader = "# taskgate secrets keys, oldest first: the last key seals secret arguments, every key opens them.\n" +
	"# Keep this file readable by the gateway's user only, and back it up apart from the ledger.\n"

func keyComment(id string) string {
	return fmt.Sprintf("# key %s, created %s\n", id, time.Now().UTC().Format(time.RFC3339))
}

func keyID(line string) (string, error) {
	k, err := parseKey(line)
	if err != nil {
		return "", err
	}
	return k.id, nil
}
