package canon

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckDoubles(t *testing.T) {
	tests := []struct {
		name, in string
		path     string // "" means no error
	}{
		{"no numbers", `{"a":"b","c":[true,false,null]}`, ""},
		{"ordinary numbers", `{"a":1,"b":-2.5,"c":1e300,"d":-1.7976931348623157e308}`, ""},
		{"unsafe integer is not an overflow", `{"n":9007199254740993}`, ""},
		{"underflow is not an overflow", `{"n":1e-400}`, ""},
		{"overflow in a string is text", `{"s":"1e400","t":"\"1e400"}`, ""},
		{"overflow in a key is text", `{"1e400":1}`, ""},
		{"escaped quote before a number", `{"s":"a\\","n":1}`, ""},
		{"overflow", `{"n":1e400}`, "arguments.n"},
		{"negative overflow", `{"n":-1E+400}`, "arguments.n"},
		{"just beyond the largest double", `{"n":1.8e308}`, "arguments.n"},
		{"309 digits", `{"n":` + strings.Repeat("9", 309) + `}`, "arguments.n"},
		{"308 digits fit", `{"n":` + strings.Repeat("9", 308) + `}`, ""},
		{"nested", `{"items":[1,{"m":2},{"deep":{"x y":[0,1e999]}}]}`, `arguments.items[2].deep["x y"][1]`},
		{"first of two", `{"a":[1e400],"b":1e400}`, "arguments.a[0]"},
		{"after a string holding an exponent", `{"s":"1e400","n":2e400}`, "arguments.n"},
		{"bare value", `1e400`, "arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckDoubles([]byte(tt.in), "arguments")
			if tt.path == "" {
				if err != nil {
					t.Fatalf("CheckDoubles(%q) = %v, want nil", tt.in, err)
				}
				return
			}
			if !errors.Is(err, ErrUnsafeInteger) {
				t.Fatalf("CheckDoubles(%q) = %v, want ErrUnsafeInteger", tt.in, err)
			}
			checkInputError(t, err)
			var ie *InputError
			errors.As(err, &ie)
			if ie.Path != tt.path {
				t.Errorf("CheckDoubles(%q) path = %q, want %q", tt.in, ie.Path, tt.path)
			}
		})
	}
}

func TestCheckDoublesMessage(t *testing.T) {
	err := CheckDoubles([]byte(`{"n":1e400}`), "arguments")
	want := "arguments.n: number 1e400 overflows an IEEE-754 double, so it cannot be read as a number; send it as a string"
	if err == nil || err.Error() != want {
		t.Errorf("CheckDoubles error = %v, want %q", err, want)
	}
}

func TestCheckDoublesAllocatesNothingForOrdinaryInput(t *testing.T) {
	raw := []byte(`{"suite":"settlement","shard":3,"ratio":0.25,"tags":["a","b"],"nested":{"n":-12}}`)
	if n := testing.AllocsPerRun(100, func() { _ = CheckDoubles(raw, "arguments") }); n != 0 {
		t.Errorf("CheckDoubles allocated %v times per call on ordinary input, want 0", n)
	}
}
