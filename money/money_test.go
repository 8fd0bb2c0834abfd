package money

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
)

func TestParseAndString(t *testing.T) {
	tests := []struct {
		in     string
		micros int64
		out    string
	}{
		{"20", 20_000_000, "20.00"},
		{"20.00", 20_000_000, "20.00"},
		{"17.84", 17_840_000, "17.84"},
		{"0.1", 100_000, "0.10"},
		{"0.000001", 1, "0.000001"},
		{"-3.5", -3_500_000, "-3.50"},
		{".5", 500_000, "0.50"},
		{"+1.25", 1_250_000, "1.25"},
		{"35.68", 35_680_000, "35.68"},
	}
	for _, tt := range tests {
		a, err := Parse(tt.in, "usd")
		if err != nil {
			t.Fatalf("Parse(%q): %v", tt.in, err)
		}
		if a.Micros != tt.micros || a.Currency != "USD" {
			t.Errorf("Parse(%q) = %+v, want %d USD", tt.in, a, tt.micros)
		}
		if got := a.String(); got != tt.out {
			t.Errorf("Parse(%q).String() = %q, want %q", tt.in, got, tt.out)
		}
	}
}

func TestParseRejects(t *testing.T) {
	for _, in := range []string{"", "1e3", "1.", "abc", "1.2345678", "1,50", "--1", "99999999999999999999", "NaN", "Inf"} {
		if _, err := Parse(in, "USD"); !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q) error = %v, want ErrSyntax", in, err)
		}
	}
}

func TestArithmetic(t *testing.T) {
	a := MustParse("17.84", "USD")
	sum, err := a.Add(a)
	if err != nil || sum.String() != "35.68" {
		t.Fatalf("17.84+17.84 = %v, %v; want 35.68", sum, err)
	}
	diff, err := MustParse("20.00", "USD").Sub(sum)
	if err != nil || diff.String() != "-15.68" {
		t.Fatalf("20.00-35.68 = %v, %v; want -15.68", diff, err)
	}
	if _, err := a.Add(MustParse("1", "EUR")); !errors.Is(err, ErrCurrencyMismatch) {
		t.Fatalf("USD+EUR error = %v, want ErrCurrencyMismatch", err)
	}
}

func TestTimes(t *testing.T) {
	tests := []struct {
		amount string
		n      int
		want   string
	}{
		{"18.00", 4, "72.00"},
		{"0.000001", 3, "0.000003"},
		{"17.84", 1, "17.84"},
		{"17.84", 0, "0.00"},
		{"-2.50", 2, "-5.00"},
	}
	for _, tt := range tests {
		got, err := MustParse(tt.amount, "USD").Times(tt.n)
		if err != nil || got.String() != tt.want || got.Currency != "USD" {
			t.Errorf("%s × %d = %s %s, %v; want %s USD", tt.amount, tt.n, got, got.Currency, err, tt.want)
		}
	}
	if _, err := MustParse("1", "USD").Times(-1); err == nil {
		t.Error("1 × -1 succeeded; a count cannot be negative")
	}
}

func TestJSON(t *testing.T) {
	b, err := json.Marshal(struct{ Cost Amount }{MustParse("18", "USD")})
	if err != nil || string(b) != `{"Cost":"18.00"}` {
		t.Fatalf("Marshal = %s, %v", b, err)
	}
	var v struct{ Cost Amount }
	if err := json.Unmarshal([]byte(`{"Cost":"17.84"}`), &v); err != nil || v.Cost.Micros != 17_840_000 {
		t.Fatalf("Unmarshal = %+v, %v", v, err)
	}
	if err := json.Unmarshal([]byte(`{"Cost":17.84}`), &v); err == nil {
		t.Fatal("Unmarshal of a JSON number succeeded; amounts must be strings")
	}
}

func TestArithmeticOverflow(t *testing.T) {
	largest := FromMicros(math.MaxInt64, "USD")
	smallest := FromMicros(math.MinInt64, "USD")
	one := FromMicros(1, "USD")
	tests := []struct {
		name string
		op   func() (Amount, error)
	}{
		{"largest + 1", func() (Amount, error) { return largest.Add(one) }},
		{"smallest + -1", func() (Amount, error) { return smallest.Add(FromMicros(-1, "USD")) }},
		{"smallest - 1", func() (Amount, error) { return smallest.Sub(one) }},
		{"largest - -1", func() (Amount, error) { return largest.Sub(FromMicros(-1, "USD")) }},
		{"0 - smallest", func() (Amount, error) { return Zero("USD").Sub(smallest) }},
		{"largest × 2", func() (Amount, error) { return largest.Times(2) }},
		{"smallest × 2", func() (Amount, error) { return smallest.Times(2) }},
	}
	for _, tt := range tests {
		got, err := tt.op()
		if !errors.Is(err, ErrOverflow) {
			t.Errorf("%s = %+v, %v; want ErrOverflow", tt.name, got, err)
		}
	}
	if got, err := largest.Sub(one); err != nil || got.Micros != math.MaxInt64-1 {
		t.Errorf("largest - 1 = %+v, %v; want %d", got, err, int64(math.MaxInt64-1))
	}
	if got, err := smallest.Add(largest); err != nil || got.Micros != -1 {
		t.Errorf("smallest + largest = %+v, %v; want -1 micro", got, err)
	}
}
