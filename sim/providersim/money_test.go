package providersim

import (
	"encoding/json"
	"testing"
)

func TestParseMicros(t *testing.T) {
	tests := []struct {
		in      string
		want    Micros
		wantErr bool
	}{
		{"17.84", 17_840_000, false},
		{"18", 18_000_000, false},
		{"23.1", 23_100_000, false},
		{"0.000001", 1, false},
		{"0", 0, false},
		{"", 0, true},
		{"1.", 0, true},
		{".5", 0, true},
		{"-1.00", 0, true},
		{"1e3", 0, true},
		{"$18.00", 0, true},
		{"1.0000001", 0, true},
		{"99999999999999999999", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseMicros(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseMicros(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseMicros(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestMicrosString(t *testing.T) {
	tests := []struct {
		in   Micros
		want string
	}{
		{USD(17, 84), "17.84"},
		{USD(23, 10), "23.10"},
		{0, "0.00"},
		{1, "0.000001"},
		{1_500_000, "1.50"},
		{-USD(2, 5), "-2.05"},
	}
	for _, tt := range tests {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("Micros(%d).String() = %q, want %q", int64(tt.in), got, tt.want)
		}
	}
}

func TestMicrosJSONIsADecimalString(t *testing.T) {
	data, err := json.Marshal(struct {
		Amount Micros `json:"amount_usd"`
	}{USD(17, 84)})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(data), `{"amount_usd":"17.84"}`; got != want {
		t.Errorf("json.Marshal = %s, want %s", got, want)
	}
	var back struct {
		Amount Micros `json:"amount_usd"`
	}
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.Amount != USD(17, 84) {
		t.Errorf("round trip = %s, want 17.84", back.Amount)
	}
	if err := json.Unmarshal([]byte(`{"amount_usd":17.84}`), &back); err == nil {
		t.Error("json.Unmarshal of a JSON number succeeded, want an error: money is never a float")
	}
}
