package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/taskgate/taskgate/money"
)

// FieldError is a bad approval or budget term. Field is the term's JSON
// name (max_total_cost, expires_in, ...); Problem says what is wrong with
// it without naming it, so that the command line can name its flag instead.
type FieldError struct {
	Field   string
	Problem string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

func fieldError(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// currencyOf is the currency code terms name, money.DefaultCurrency for
// none.
func currencyOf(raw string) (string, *FieldError) {
	c := strings.ToUpper(raw)
	if c == "" {
		c = money.DefaultCurrency
	}
	if !isCurrencyCode(c) {
		return "", fieldError("currency", "%q is not a three-letter currency code such as USD", raw)
	}
	return c, nil
}

func isCurrencyCode(c string) bool {
	if len(c) != 3 {
		return false
	}
	for i := range len(c) {
		if c[i] < 'A' || c[i] > 'Z' {
			return false
		}
	}
	return true
}

// expiry is when terms giving exactly one of at and in expire, in counted
// from now; example is a typical in, noun what expires ("a budget").
func expiry(at time.Time, in time.Duration, now time.Time, example, noun string) (time.Time, *FieldError) {
	switch {
	case at.IsZero() == (in == 0):
		return time.Time{}, fieldError("expires_in", "give exactly one of expires_in (e.g. %s) and expires_at (RFC 3339)", example)
	case in < 0:
		return time.Time{}, fieldError("expires_in", "%s is negative; %s must expire in the future", in, noun)
	case in > 0:
		return now.Add(in), nil
	case !at.After(now):
		return time.Time{}, fieldError("expires_at", "%s is not in the future", at.UTC().Format(time.RFC3339))
	}
	return at, nil
}

// decimalField reads a decimal string field of a body, refusing a JSON
// number; example is a typical amount.
func decimalField(field string, raw json.RawMessage, example string) (string, *apiError) {
	switch s := strings.TrimSpace(string(raw)); {
	case s == "" || s == "null":
		return "", nil
	case s[0] == '"':
		var out string
		if err := json.Unmarshal(raw, &out); err != nil {
			return "", badRequest(field, "%s: %v", field, err)
		}
		return out, nil
	default:
		return "", badRequest(field, "%s must be a decimal string such as %q, not %s: a JSON number may lose precision on the way", field, example, s)
	}
}

// expiresAt reads a body's expires_at, zero when absent.
func expiresAt(raw string) (time.Time, *apiError) {
	if raw == "" {
		return time.Time{}, nil
	}
	at, err := time.Parse(time.RFC3339, raw)
	if err != nil {
		return time.Time{}, badRequest("expires_at", "expires_at %q is not an RFC 3339 time such as 2026-09-01T12:00:00Z", raw)
	}
	return at, nil
}
