package ledger

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxTenantBytes bounds a tenant name; tenants end up in every ledger row,
// log line and receipt.
const MaxTenantBytes = 256

// CheckTenant rejects tenant names that could not be stored, logged and
// shown safely: authentication gives no credential such a tenant, and the
// configuration names none.
func CheckTenant(t string) error {
	if t == "" {
		return errors.New("tenant is empty")
	}
	if len(t) > MaxTenantBytes {
		return fmt.Errorf("tenant is %d bytes long; at most %d are allowed", len(t), MaxTenantBytes)
	}
	if !utf8.ValidString(t) {
		return errors.New("tenant is not valid UTF-8")
	}
	if strings.ContainsFunc(t, unicode.IsControl) {
		return errors.New("tenant contains control characters")
	}
	return nil
}
