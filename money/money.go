// Package money holds amounts of money as integer micro-units of a currency and
// their decimal text form ("17.84").
//
// Amounts are never floats: a float cannot hold 0.1 exactly, and a spend
// ceiling that drifts by a rounding error is not a ceiling. Amounts are read
// and printed as decimal strings with at most six fractional digits.
package money

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MicrosPerUnit is the number of micro-units in one unit of currency.
const MicrosPerUnit = 1_000_000

// DefaultCurrency is the currency assumed when none is named.
const DefaultCurrency = "USD"

// ErrSyntax is wrapped by every parse failure.
var ErrSyntax = errors.New("invalid amount")

// ErrCurrencyMismatch is returned when two amounts of different currencies meet.
var ErrCurrencyMismatch = errors.New("currency mismatch")

// ErrOverflow is returned when a sum or difference does not fit in 64-bit
// micro-units: a wrapped total would turn a huge charge into a credit.
var ErrOverflow = errors.New("amount out of range")

// Amount is a sum of money: integer micro-units of Currency.
type Amount struct {
	Micros   int64
	Currency string
}

// Zero returns a zero amount of currency.
func Zero(currency string) Amount { return Amount{Currency: normCurrency(currency)} }

// FromMicros returns an amount of micro-units of currency.
func FromMicros(micros int64, currency string) Amount {
	return Amount{Micros: micros, Currency: normCurrency(currency)}
}

// Parse reads a decimal amount such as "20", "20.00" or "17.845" in currency.
// It rejects exponents, more than six fractional digits and values that do
// not fit in 64-bit micro-units.
func Parse(s, currency string) (Amount, error) {
	micros, err := parseMicros(strings.TrimSpace(s))
	if err != nil {
		return Amount{}, err
	}
	return Amount{Micros: micros, Currency: normCurrency(currency)}, nil
}

// MustParse is Parse for literals in code and tests; it panics on bad input.
func MustParse(s, currency string) Amount {
	a, err := Parse(s, currency)
	if err != nil {
		panic(err)
	}
	return a
}

func parseMicros(s string) (int64, error) {
	if s == "" {
		return 0, fmt.Errorf("%w: empty string; write a decimal such as 20.00", ErrSyntax)
	}
	neg := false
	body := s
	switch body[0] {
	case '-':
		neg, body = true, body[1:]
	case '+':
		body = body[1:]
	}
	whole, frac, hasDot := strings.Cut(body, ".")
	if whole == "" && frac == "" || hasDot && frac == "" || !digits(whole) || !digits(frac) {
		return 0, fmt.Errorf("%w: %q is not a decimal number such as 20.00", ErrSyntax, s)
	}
	if len(frac) > 6 {
		return 0, fmt.Errorf("%w: %q has more than six decimal places", ErrSyntax, s)
	}
	frac += strings.Repeat("0", 6-len(frac))
	var w, f int64
	var err error
	if whole != "" {
		if w, err = strconv.ParseInt(whole, 10, 64); err != nil || w > math.MaxInt64/MicrosPerUnit-1 {
			return 0, fmt.Errorf("%w: %q is too large", ErrSyntax, s)
		}
	}
	if f, err = strconv.ParseInt(frac, 10, 64); err != nil {
		return 0, fmt.Errorf("%w: %q is not a decimal number", ErrSyntax, s)
	}
	m := w*MicrosPerUnit + f
	if neg {
		m = -m
	}
	return m, nil
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func normCurrency(c string) string {
	if c == "" {
		return DefaultCurrency
	}
	return strings.ToUpper(c)
}

// String prints the amount as a decimal with at least two fractional digits
// ("17.84", "20.00", "0.125"), without the currency.
func (a Amount) String() string {
	m := a.Micros
	sign := ""
	if m < 0 {
		sign, m = "-", -m
	}
	frac := fmt.Sprintf("%06d", m%MicrosPerUnit)
	frac = strings.TrimRight(frac, "0")
	for len(frac) < 2 {
		frac += "0"
	}
	return fmt.Sprintf("%s%d.%s", sign, m/MicrosPerUnit, frac)
}

// Display prints the amount with its currency, e.g. "17.84 USD".
func (a Amount) Display() string { return a.String() + " " + normCurrency(a.Currency) }

// IsZero reports whether the amount is zero.
func (a Amount) IsZero() bool { return a.Micros == 0 }

// Add returns a+b; the currencies must match and the sum must fit in
// 64-bit micro-units.
func (a Amount) Add(b Amount) (Amount, error) {
	c, err := sameCurrency(a, b)
	if err != nil {
		return Amount{}, err
	}
	sum := a.Micros + b.Micros
	if (b.Micros > 0 && sum < a.Micros) || (b.Micros < 0 && sum > a.Micros) {
		return Amount{}, fmt.Errorf("%w: %s + %s", ErrOverflow, a.Display(), b.Display())
	}
	return Amount{Micros: sum, Currency: c}, nil
}

// Sub returns a-b; the currencies must match and the difference must fit in
// 64-bit micro-units.
func (a Amount) Sub(b Amount) (Amount, error) {
	c, err := sameCurrency(a, b)
	if err != nil {
		return Amount{}, err
	}
	diff := a.Micros - b.Micros
	if (b.Micros > 0 && diff > a.Micros) || (b.Micros < 0 && diff < a.Micros) {
		return Amount{}, fmt.Errorf("%w: %s - %s", ErrOverflow, a.Display(), b.Display())
	}
	return Amount{Micros: diff, Currency: c}, nil
}

// Times returns a*n, for n of at least zero; the product must fit in
// 64-bit micro-units.
func (a Amount) Times(n int) (Amount, error) {
	if n < 0 {
		return Amount{}, fmt.Errorf("cannot multiply %s by a negative count (%d)", a.Display(), n)
	}
	if n > 0 && (a.Micros > math.MaxInt64/int64(n) || a.Micros < math.MinInt64/int64(n)) {
		return Amount{}, fmt.Errorf("%w: %s × %d", ErrOverflow, a.Display(), n)
	}
	return Amount{Micros: a.Micros * int64(n), Currency: a.Currency}, nil
}

func sameCurrency(a, b Amount) (string, error) {
	ca, cb := normCurrency(a.Currency), normCurrency(b.Currency)
	if ca != cb {
		return "", fmt.Errorf("%w: %s and %s", ErrCurrencyMismatch, ca, cb)
	}
	return ca, nil
}

// MarshalJSON writes the amount as a decimal string, never a JSON number.
func (a Amount) MarshalJSON() ([]byte, error) { return json.Marshal(a.String()) }

// UnmarshalJSON reads a decimal string in the default currency; a bare JSON
// number is refused because it may already have lost precision.
func (a *Amount) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%w: amounts are decimal strings such as \"20.00\", got %s", ErrSyntax, b)
	}
	p, err := Parse(s, a.Currency)
	if err != nil {
		return err
	}
	*a = p
	return nil
}

// MarshalText writes the decimal form (used by YAML encoders).
func (a Amount) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText reads the decimal form.
func (a *Amount) UnmarshalText(b []byte) error {
	p, err := Parse(string(b), a.Currency)
	if err != nil {
		return err
	}
	*a = p
	return nil
}
