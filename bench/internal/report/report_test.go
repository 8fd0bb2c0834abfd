package report

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
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
