package providersim

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Micros is an amount of US dollars in integer micro-units (1 USD = 1,000,000
// Micros). Money is never a float: amounts are parsed from and printed as
// decimal strings such as "17.84".
type Micros int64

// microsPerUnit is the number of Micros in one dollar.
const microsPerUnit = 1_000_000

// USD returns the amount for a whole number of dollars and cents, e.g.
// USD(17, 84) is 17.84.
func USD(dollars, cents int64) Micros {
	return Micros(dollars*microsPerUnit + cents*10_000)
}

// ParseMicros parses a non-negative decimal dollar amount with at most six
// fractional digits, such as "17.84", "23.1" or "18".
func ParseMicros(s string) (Micros, error) {
	whole, frac, hasDot := strings.Cut(s, ".")
	if whole == "" || (hasDot && frac == "") {
		return 0, fmt.Errorf("amount %q is not a decimal number like 17.84", s)
	}
	if len(frac) > 6 {
		return 0, fmt.Errorf("amount %q has more than six fractional digits", s)
	}
	for _, part := range []string{whole, frac} {
		for _, r := range part {
			if r < '0' || r > '9' {
				return 0, fmt.Errorf("amount %q is not a non-negative decimal number like 17.84", s)
			}
		}
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > (1<<62)/microsPerUnit {
		return 0, fmt.Errorf("amount %q is too large", s)
	}
	f := int64(0)
	if frac != "" {
		f, _ = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
	}
	return Micros(w*microsPerUnit + f), nil
}

// String prints the amount with at least two and at most six fractional
// digits: "17.84", "0.00", "0.000001".
func (m Micros) String() string {
	sign := ""
	v := int64(m)
	if v < 0 {
		sign, v = "-", -v
	}
	frac := fmt.Sprintf("%06d", v%microsPerUnit)
	frac = strings.TrimRight(frac, "0")
	for len(frac) < 2 {
		frac += "0"
	}
	return fmt.Sprintf("%s%d.%s", sign, v/microsPerUnit, frac)
}

// MarshalJSON writes the amount as a decimal string, never as a JSON number.
func (m Micros) MarshalJSON() ([]byte, error) {
	return json.Marshal(m.String())
}

// UnmarshalJSON reads a decimal string written by MarshalJSON.
func (m *Micros) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("amount must be a decimal string like \"17.84\": %w", err)
	}
	v, err := ParseMicros(s)
	if err != nil {
		return err
	}
	*m = v
	return nil
}
