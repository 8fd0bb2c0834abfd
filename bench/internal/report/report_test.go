package report

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
)

func TestRounds(t *testing.T) {
	tests := []struct {
		rates []float64
		want  string
	}{
		{nil, "-"},
		{[]float64{1234.4, 99.6}, "1234 100"},
	}
	for _, tt := range tests {
		if got := Rounds(tt.rates); got != tt.want {
			t.Errorf("Rounds(%v) = %q, want %q", tt.rates, got, tt.want)
		}
	}
}

func TestTarget(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		met  *bool
		want string
	}{
		{nil, "-"},
		{&yes, ">= 0.70  PASS"},
		{&no, ">= 0.70  BELOW"},
	}
	for _, tt := range tests {
		if got := Target(">= 0.70", tt.met); got != tt.want {
			t.Errorf("Target(met %v) = %q, want %q", tt.met, got, tt.want)
		}
	}
}

func TestPrint(t *testing.T) {
	type doc struct {
		Machine
		Dir string `json:"dir"`
	}
	d := doc{Machine: ThisMachine(), Dir: "/tmp"}
	var b bytes.Buffer
	if err := Print(&b, true, d, func(io.Writer) { t.Error("the table was printed for -json") }); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("the JSON does not decode: %v\n%s", err, b.String())
	}
	if got["go_version"] != d.GoVersion || got["dir"] != "/tmp" || !strings.HasPrefix(b.String(), "{\n  \"go_version\"") {
		t.Errorf("JSON = %s, want the machine's facts first and inline", b.String())
	}
	b.Reset()
	if err := Print(&b, false, d, func(w io.Writer) { io.WriteString(w, "table\n") }); err != nil || b.String() != "table\n" {
		t.Errorf("Print without JSON wrote %q, %v; want the table", b.String(), err)
	}
}

func TestNewRatio(t *testing.T) {
	tests := []struct {
		num, den, target float64
		value            float64
		met              any
	}{
		{num: 70, den: 100, target: 0.7, value: 0.7, met: true},
		{num: 69, den: 100, target: 0.7, value: 0.69, met: false},
		{num: 50, den: 100, value: 0.5, met: nil},
		{num: 50, den: 0, target: 0.7, value: 0, met: false},
	}
	for _, tt := range tests {
		r := NewRatio("r", tt.num, tt.den, tt.target)
		var met any
		if r.Met != nil {
			met = *r.Met
		}
		if d := r.Value - tt.value; d > 1e-9 || d < -1e-9 || met != tt.met || r.Target != tt.target {
			t.Errorf("NewRatio(%v, %v, %v) = %+v (met %v), want %v (met %v)", tt.num, tt.den, tt.target, r, met, tt.value, tt.met)
		}
	}
}

func TestPrintRatios(t *testing.T) {
	rs := []Ratio{NewRatio("accept / raw", 150, 100, 0.5), NewRatio("scaling", 80, 100, 0)}
	var b bytes.Buffer
	PrintRatios(&b, rs, "x")
	want := "ratio         value  target          \n" +
		"accept / raw  1.50x  >= 0.50x  PASS  \n" +
		"scaling       0.80x  -               \n"
	if b.String() != want {
		t.Errorf("PrintRatios =\n%q\nwant\n%q", b.String(), want)
	}
}

func TestSeconds(t *testing.T) {
	if got, want := Seconds(0.5), 500*time.Millisecond; got != want {
		t.Errorf("Seconds(0.5) = %s, want %s", got, want)
	}
}
