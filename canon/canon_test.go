package canon

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

var sentinels = []error{ErrDuplicateKey, ErrUnsafeInteger, ErrInvalidUTF8, ErrInvalidJSON, ErrTooDeep, ErrTooLarge, ErrNotObject}

// nested returns depth arrays nested inside each other around inner.
func nested(depth int, inner string) string {
	return strings.Repeat("[", depth) + inner + strings.Repeat("]", depth)
}

// nestedObjects returns depth objects {"k":…} nested around inner.
func nestedObjects(depth int, inner string) string {
	return strings.Repeat(`{"k":`, depth) + inner + strings.Repeat("}", depth)
}

func TestCanonicalize(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"sorted keys", `{"b":2,"a":1}`, `{"a":1,"b":2}`},
		{"whitespace", " {\n\t\"b\" : [ 1 , 2 ] ,\r\n \"a\" : { } } ", `{"a":{},"b":[1,2]}`},
		{"nested reorder", `{"z":{"y":1,"x":[{"d":4,"c":3}]},"a":null}`, `{"a":null,"z":{"x":[{"c":3,"d":4}],"y":1}}`},
		// RFC 8785 section 3.2.2, without 1E30, which is an integer beyond 2^53.
		{
			"rfc8785 serialization",
			`{"numbers": [333333333.33333329, 4.50, 2e-3, 0.000000000000000000000000001], "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/", "literals": [null, true, false]}`,
			`{"literals":[null,true,false],"numbers":[333333333.3333333,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`,
		},
		// RFC 8785 section 3.2.3: keys sort by UTF-16 code units, so U+1F600
		// (a surrogate pair starting 0xD83D) sorts before U+FB33.
		{
			"rfc8785 sorting",
			`{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`,
			"{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}",
		},
		{"one point zero is one", `[1.0,1e0,10e-1]`, `[1,1,1]`},
		{"negative zero is zero", `[-0,-0.0]`, `[0,0]`},
		{"exponent integer in range", `[1e2,1e15,-1e15]`, `[100,1000000000000000,-1000000000000000]`},
		{"fractions", `[0.1,1.5e-7,1.5E-7,0.000001,123.456]`, `[0.1,1.5e-7,1.5e-7,0.000001,123.456]`},
		{"largest safe integers", `[9007199254740991,-9007199254740991]`, `[9007199254740991,-9007199254740991]`},
		{"fraction near 2^53 rounds below it", `9007199254740990.5`, `9007199254740990`},
		{"underflow is zero", `1e-400`, `0`},
		{"top-level string", ` "x" `, `"x"`},
		{"top-level number", "42\n", `42`},
		{"top-level literal", `true`, `true`},
		{"surrogate pair", `"\ud83d\ude00"`, `"😀"`},
		{"escaped key", `{"\u0061":1}`, `{"a":1}`},
		{"escaped backslash before u", `"\\ud800"`, `"\\ud800"`},
		{"control characters", `"\u001f\b"`, `"\u001f\b"`},
		{"html characters stay literal", `"\u003c>&"`, `"<>&"`},
		{"depth limit", nested(MaxDepth, "1"), nested(MaxDepth, "1")},
		{"object depth limit", nestedObjects(MaxDepth, "1"), nestedObjects(MaxDepth, "1")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tt.in))
			if err != nil {
				t.Fatalf("Canonicalize(%q) error: %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Errorf("Canonicalize(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestCanonicalizeSizeLimit(t *testing.T) {
	atLimit := `"` + strings.Repeat("a", MaxSize-2) + `"`
	if _, err := Canonicalize([]byte(atLimit)); err != nil {
		t.Errorf("Canonicalize(%d bytes) error: %v, want success", len(atLimit), err)
	}
	over := atLimit + " "
	_, err := Canonicalize([]byte(over))
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("Canonicalize(%d bytes) error = %v, want ErrTooLarge", len(over), err)
	}
}

func TestCanonicalizeRejects(t *testing.T) {
	tests := []struct {
		name, in string
		want     error
		path     string
	}{
		// Duplicate keys, compared after unescaping, at any depth.
		{"duplicate key", `{"a":1,"a":2}`, ErrDuplicateKey, `$.a`},
		{"duplicate key same value", `{"a":1,"b":2,"a":1}`, ErrDuplicateKey, `$.a`},
		{"duplicate escaped key", `{"a":1,"\u0061":2}`, ErrDuplicateKey, `$.a`},
		{"duplicate escaped non-ascii key", `{"é":1,"\u00e9":2}`, ErrDuplicateKey, `$["é"]`},
		{"duplicate escaped surrogate pair key", `{"😀":1,"\ud83d\ude00":2}`, ErrDuplicateKey, `$["😀"]`},
		{"duplicate key at depth", `{"items":[{"n":1},{"n":1},{"m":{"a":[],"a":{}}}]}`, ErrDuplicateKey, `$.items[2].m.a`},
		{"duplicate key with odd name", `{"x":{"a b":1,"a b":2}}`, ErrDuplicateKey, `$.x["a b"]`},

		// Integers beyond ±(2^53-1), however they are written.
		{"2^53", `9007199254740992`, ErrUnsafeInteger, `$`},
		{"2^53+1", `9007199254740993`, ErrUnsafeInteger, `$`},
		{"-2^53", `-9007199254740992`, ErrUnsafeInteger, `$`},
		{"-(2^53+1)", `-9007199254740993`, ErrUnsafeInteger, `$`},
		{"2^53 with fraction zero", `9007199254740992.0`, ErrUnsafeInteger, `$`},
		{"2^53 in exponent form", `9.007199254740992e15`, ErrUnsafeInteger, `$`},
		{"fraction rounding up to 2^53", `9007199254740991.9`, ErrUnsafeInteger, `$`},
		{"1e16", `1e16`, ErrUnsafeInteger, `$`},
		{"1e21", `1e21`, ErrUnsafeInteger, `$`},
		{"1E30", `1E30`, ErrUnsafeInteger, `$`},
		{"1.5e300", `1.5e300`, ErrUnsafeInteger, `$`},
		{"twenty digits", `12345678901234567890`, ErrUnsafeInteger, `$`},
		{"overflow", `1e400`, ErrUnsafeInteger, `$`},
		{"negative overflow", `-1e400`, ErrUnsafeInteger, `$`},
		{"unsafe integer at depth", `{"items":[1,2,{"n":9007199254740993}]}`, ErrUnsafeInteger, `$.items[2].n`},

		// Invalid UTF-8, raw or as escaped lone surrogates.
		{"raw 0xff in value", "{\"a\":\"x\xffy\"}", ErrInvalidUTF8, `$.a`},
		{"raw 0xff in key", "{\"a\xff\":1}", ErrInvalidUTF8, `$`},
		{"truncated sequence", "[\"\xe2\x82\"]", ErrInvalidUTF8, `$[0]`},
		{"encoded surrogate", "\"\xed\xa0\x80\"", ErrInvalidUTF8, `$`},
		{"overlong encoding", "\"\xc0\xaf\"", ErrInvalidUTF8, `$`},
		{"lone high surrogate", `"\ud800"`, ErrInvalidUTF8, `$`},
		{"lone low surrogate", `"\udc00"`, ErrInvalidUTF8, `$`},
		{"high surrogate then letter", `"\ud800\u0041"`, ErrInvalidUTF8, `$`},
		{"high surrogate then high", `"\ud800\ud800"`, ErrInvalidUTF8, `$`},
		{"reversed pair", `"\ude00\ud83d"`, ErrInvalidUTF8, `$`},
		{"high surrogate then text", `"\ud83dx"`, ErrInvalidUTF8, `$`},
		{"lone surrogate after escaped backslash", `"\\\ud800"`, ErrInvalidUTF8, `$`},
		{"lone surrogate in key", `{"ok":{"\udfff":1}}`, ErrInvalidUTF8, `$.ok`},

		// Not exactly one JSON value.
		{"empty", ``, ErrInvalidJSON, `$`},
		{"blank", " \n\t", ErrInvalidJSON, `$`},
		{"unterminated object", `{"a":1`, ErrInvalidJSON, `$`},
		{"unterminated string", `{"a":"x`, ErrInvalidJSON, `$.a`},
		{"trailing comma in array", `[1,]`, ErrInvalidJSON, `$[1]`},
		{"trailing comma in object", `{"a":1,}`, ErrInvalidJSON, `$`},
		{"missing comma", `[1 2]`, ErrInvalidJSON, `$[1]`},
		{"two values", `1 2`, ErrInvalidJSON, `$`},
		{"trailing garbage", `{} x`, ErrInvalidJSON, `$`},
		{"leading zero", `01`, ErrInvalidJSON, `$`},
		{"single quotes", `{'a':1}`, ErrInvalidJSON, `$`},
		{"NaN", `NaN`, ErrInvalidJSON, `$`},
		{"Infinity", `[Infinity]`, ErrInvalidJSON, `$[0]`},
		{"bare word", `nul`, ErrInvalidJSON, `$`},
		{"raw control character", "\"a\nb\"", ErrInvalidJSON, `$`},
		{"byte order mark", "\xef\xbb\xbf{}", ErrInvalidJSON, `$`},

		// Nesting beyond MaxDepth.
		{"arrays too deep", nested(MaxDepth+1, ""), ErrTooDeep, `$` + strings.Repeat("[0]", MaxDepth)},
		{"objects too deep", nestedObjects(MaxDepth+1, "1"), ErrTooDeep, `$` + strings.Repeat(".k", MaxDepth)},
		{"far too deep", strings.Repeat("[", 100000), ErrTooDeep, `$` + strings.Repeat("[0]", MaxDepth)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tt.in))
			if err == nil {
				t.Fatalf("Canonicalize(%q) = %q, want error %v", tt.in, got, tt.want)
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Canonicalize(%q) error = %v, want %v", tt.in, err, tt.want)
			}
			checkInputError(t, err)
			var ie *InputError
			errors.As(err, &ie)
			if ie.Path != tt.path {
				t.Errorf("Canonicalize(%q) error path = %q, want %q (error: %v)", tt.in, ie.Path, tt.path, err)
			}
		})
	}
}

// checkInputError fails unless err is an *InputError that unwraps to exactly
// one sentinel and reads "path: reason".
func checkInputError(t *testing.T, err error) {
	t.Helper()
	var ie *InputError
	if !errors.As(err, &ie) {
		t.Fatalf("error %v (%T) is not an *InputError", err, err)
	}
	matched := 0
	for _, s := range sentinels {
		if errors.Is(err, s) {
			matched++
		}
	}
	if matched != 1 {
		t.Errorf("error %v matches %d sentinels, want 1", err, matched)
	}
	if ie.Path == "" || ie.Reason == "" || err.Error() != ie.Path+": "+ie.Reason {
		t.Errorf("error %q does not read as path %q then reason %q", err, ie.Path, ie.Reason)
	}
}

func TestErrorMessages(t *testing.T) {
	longKey := strings.Repeat("k", 100)
	tests := []struct {
		name, args, want string
	}{
		{
			"unsafe integer",
			`{"amount":9007199254740993}`,
			"arguments.amount: integer 9007199254740993 is outside ±(2^53-1), the range an IEEE-754 double holds exactly, so it cannot be compared exactly; send it as a string",
		},
		{
			"unsafe integer in exponent form",
			`{"items":[0,1,{"n":1e16}]}`,
			"arguments.items[2].n: number 1e16 is an integer outside ±(2^53-1), the range an IEEE-754 double holds exactly, so it cannot be compared exactly; send it as a string",
		},
		{
			"overflow",
			`{"n":-1e400}`,
			"arguments.n: number -1e400 is outside ±(2^53-1) and overflows an IEEE-754 double, so it cannot be compared exactly; send it as a string",
		},
		{
			"long number is truncated",
			`{"n":` + strings.Repeat("9", 100) + `}`,
			"arguments.n: integer " + strings.Repeat("9", 64) + "… (100 bytes) is outside ±(2^53-1), the range an IEEE-754 double holds exactly, so it cannot be compared exactly; send it as a string",
		},
		{
			"duplicate key",
			`{"a":1,"\u0061":2}`,
			`arguments.a: key "a" appears more than once in the same object (keys are compared after unescaping); send each key once`,
		},
		{
			"long duplicate key is truncated",
			`{"` + longKey + `":1,"` + longKey + `":2}`,
			`arguments["` + longKey[:64] + `"… (100 bytes)]: key "` + longKey[:64] + `"… (100 bytes) appears more than once in the same object (keys are compared after unescaping); send each key once`,
		},
		{
			"lone surrogate",
			`{"name":"\ud800"}`,
			`arguments.name: the string contains \ud800, a lone UTF-16 surrogate that is not a Unicode character (offset 9); send valid UTF-8 text`,
		},
		{
			"raw invalid byte",
			"{\"name\":\"ab\xff\"}",
			"arguments.name: the string is not valid UTF-8 (byte 0xff at offset 11); send text as UTF-8",
		},
		{
			"too deep",
			nestedObjects(MaxDepth, "[]"),
			"arguments" + strings.Repeat(".k", MaxDepth) + ": arrays and objects nest deeper than 64 levels; send a flatter value",
		},
		{
			"not an object",
			`[1]`,
			"arguments: a tool's arguments must be a JSON object, got an array; send the arguments as an object, or {} when there are none",
		},
		{
			"null",
			`null`,
			"arguments: a tool's arguments must be a JSON object, got null; send the arguments as an object, or {} when there are none",
		},
		{
			"syntax",
			`{"a":[1,}`,
			"arguments.a[1]: not valid JSON: invalid character '}' looking for beginning of value (at offset 8); send well-formed JSON",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compute("billing", "charge", json.RawMessage(tt.args))
			if err == nil {
				t.Fatalf("Compute(%q) succeeded, want error %q", tt.args, tt.want)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("Compute(%q) error =\n%s\nwant\n%s", tt.args, got, tt.want)
			}
		})
	}
}

func TestComputeKnownAnswer(t *testing.T) {
	// The exact bytes the fingerprint is taken over: members sorted, no
	// whitespace, server and tool beside the arguments.
	const canonical = `{"arguments":{"a":1,"b":[true,null,"x"]},"server":"s","tool":"t"}`
	sum := sha256.Sum256([]byte(canonical))
	want := Fingerprint(hex.EncodeToString(sum[:]))

	got, err := Compute("s", "t", json.RawMessage(` { "b" : [ true , null , "x" ] , "a" : 1.0 } `))
	if err != nil {
		t.Fatalf("Compute error: %v", err)
	}
	if got != want {
		t.Errorf("Compute = %s, want %s (sha256 of %s)", got, want, canonical)
	}
	if len(got) != 64 || strings.ToLower(string(got)) != string(got) {
		t.Errorf("Compute = %q, want 64 lowercase hex digits", got)
	}
}

func TestComputeEmptyArguments(t *testing.T) {
	const canonical = `{"arguments":{},"server":"s","tool":"t"}`
	sum := sha256.Sum256([]byte(canonical))
	want := Fingerprint(hex.EncodeToString(sum[:]))
	for _, args := range []json.RawMessage{nil, {}, json.RawMessage(`{}`), json.RawMessage(" { } \n")} {
		got, err := Compute("s", "t", args)
		if err != nil {
			t.Fatalf("Compute(%q) error: %v", args, err)
		}
		if got != want {
			t.Errorf("Compute(%q) = %s, want %s", args, got, want)
		}
	}
}

func TestComputeEquivalence(t *testing.T) {
	type call struct {
		server, tool, args string
	}
	tests := []struct {
		name string
		a, b call
		same bool
	}{
		{"reordered keys", call{"s", "t", `{"a":1,"b":2}`}, call{"s", "t", `{"b":2,"a":1}`}, true},
		{
			"reordered nested objects and arrays of objects",
			call{"s", "t", `{"job":{"suite":"settlement","env":{"region":"eu","tier":2}},"steps":[{"name":"build","retries":0},{"name":"test","retries":1}]}`},
			call{"s", "t", `{"steps":[{"retries":0,"name":"build"},{"retries":1,"name":"test"}],"job":{"env":{"tier":2,"region":"eu"},"suite":"settlement"}}`},
			true,
		},
		{"whitespace", call{"s", "t", `{"a":[1,2]}`}, call{"s", "t", "{ \"a\" :\n\t[ 1 ,\r\n2 ] }"}, true},
		{"one point zero", call{"s", "t", `{"n":1}`}, call{"s", "t", `{"n":1.0}`}, true},
		{"escaped key and value", call{"s", "t", `{"a":"é"}`}, call{"s", "t", `{"\u0061":"\u00e9"}`}, true},
		{"different value", call{"s", "t", `{"a":1}`}, call{"s", "t", `{"a":2}`}, false},
		{"different nested value", call{"s", "t", `{"a":{"b":[1,{"c":true}]}}`}, call{"s", "t", `{"a":{"b":[1,{"c":false}]}}`}, false},
		{"array order", call{"s", "t", `{"a":[1,2]}`}, call{"s", "t", `{"a":[2,1]}`}, false},
		{"number and string", call{"s", "t", `{"a":1}`}, call{"s", "t", `{"a":"1"}`}, false},
		{"largest safe integer and its neighbour", call{"s", "t", `{"a":9007199254740991}`}, call{"s", "t", `{"a":9007199254740990}`}, false},
		{"extra key", call{"s", "t", `{"a":1}`}, call{"s", "t", `{"a":1,"b":null}`}, false},
		{"different tool", call{"s", "t", `{"a":1}`}, call{"s", "u", `{"a":1}`}, false},
		{"different server", call{"s", "t", `{"a":1}`}, call{"r", "t", `{"a":1}`}, false},
		{"server and tool boundary", call{"ab", "c", `{}`}, call{"a", "bc", `{}`}, false},
		{"server and tool swapped", call{"x", "y", `{}`}, call{"y", "x", `{}`}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fa, err := Compute(tt.a.server, tt.a.tool, json.RawMessage(tt.a.args))
			if err != nil {
				t.Fatalf("Compute(%+v) error: %v", tt.a, err)
			}
			fb, err := Compute(tt.b.server, tt.b.tool, json.RawMessage(tt.b.args))
			if err != nil {
				t.Fatalf("Compute(%+v) error: %v", tt.b, err)
			}
			if got := fa == fb; got != tt.same {
				t.Errorf("Compute(%+v) == Compute(%+v) is %v, want %v", tt.a, tt.b, got, tt.same)
			}
		})
	}
}

func TestComputeRejects(t *testing.T) {
	tests := []struct {
		name, server, tool, args string
		want                     error
		path                     string
	}{
		{"array arguments", "s", "t", `[{"a":1}]`, ErrNotObject, "arguments"},
		{"string arguments", "s", "t", `"a"`, ErrNotObject, "arguments"},
		{"number arguments", "s", "t", ` 1 `, ErrNotObject, "arguments"},
		{"boolean arguments", "s", "t", `true`, ErrNotObject, "arguments"},
		{"null arguments", "s", "t", `null`, ErrNotObject, "arguments"},
		{"blank arguments", "s", "t", ` `, ErrInvalidJSON, "arguments"},
		{"invalid arguments", "s", "t", `{"a":}`, ErrInvalidJSON, "arguments.a"},
		{"unsafe integer", "s", "t", `{"items":[0,1,{"n":9007199254740992}]}`, ErrUnsafeInteger, "arguments.items[2].n"},
		{"duplicate key", "s", "t", `{"a":{"b":1,"b":1}}`, ErrDuplicateKey, "arguments.a.b"},
		{"server not UTF-8", "s\xff", "t", `{}`, ErrInvalidUTF8, "server"},
		{"tool not UTF-8", "s", "\xc0t", `{}`, ErrInvalidUTF8, "tool"},
		{"arguments too deep", "s", "t", nestedObjects(MaxDepth+1, "1"), ErrTooDeep, "arguments" + strings.Repeat(".k", MaxDepth)},
		{"arguments too large", "s", "t", `{"a":"` + strings.Repeat("x", MaxSize) + `"}`, ErrTooLarge, "arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fp, err := Compute(tt.server, tt.tool, json.RawMessage(tt.args))
			if err == nil {
				t.Fatalf("Compute(%q, %q, %.40q) = %s, want error %v", tt.server, tt.tool, tt.args, fp, tt.want)
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Compute(%q, %q, %.40q) error = %v, want %v", tt.server, tt.tool, tt.args, err, tt.want)
			}
			checkInputError(t, err)
			var ie *InputError
			errors.As(err, &ie)
			if ie.Path != tt.path {
				t.Errorf("Compute(%q, %q, %.40q) error path = %q, want %q", tt.server, tt.tool, tt.args, ie.Path, tt.path)
			}
		})
	}
}

func TestComputeDepthCountsArgumentsObject(t *testing.T) {
	// The arguments object is level 1, so MaxDepth levels in all are accepted.
	args := nestedObjects(MaxDepth, "1")
	if _, err := Compute("s", "t", json.RawMessage(args)); err != nil {
		t.Errorf("Compute(%d nested objects) error: %v, want success", MaxDepth, err)
	}
}

// reencode writes the JSON value v, decoded with UseNumber, with object keys
// in reverse sorted order, whitespace between tokens, and every plain integer
// written with a ".0" fraction: a different text for the same JSON value.
func reencode(buf *bytes.Buffer, v any) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		slices.Reverse(keys)
		buf.WriteString("{ ")
		for i, k := range keys {
			if i > 0 {
				buf.WriteString(" ,\n")
			}
			kj, _ := json.Marshal(k)
			buf.Write(kj)
			buf.WriteString(" : ")
			reencode(buf, v[k])
		}
		buf.WriteString(" }")
	case []any:
		buf.WriteString("[ ")
		for i, e := range v {
			if i > 0 {
				buf.WriteString(" , ")
			}
			reencode(buf, e)
		}
		buf.WriteString(" ]")
	case json.Number:
		buf.WriteString(string(v))
		if !strings.ContainsAny(string(v), ".eE") {
			buf.WriteString(".0")
		}
	default:
		b, _ := json.Marshal(v)
		buf.Write(b)
	}
}

func decodeNumbers(t testing.TB, data []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decoding %q, which passed validation: %v", data, err)
	}
	return v
}

func FuzzCanonicalize(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := Canonicalize(data)
		if err != nil {
			checkInputError(t, err)
			if errors.Is(err, ErrInvalidJSON) && json.Valid(data) {
				t.Fatalf("Canonicalize(%q) = %v, but encoding/json finds it valid", data, err)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("Canonicalize(%q) = %q, but encoding/json finds the input invalid", data, out)
		}
		if !json.Valid(out) || !utf8.Valid(out) {
			t.Fatalf("Canonicalize(%q) = %q, which is not valid UTF-8 JSON", data, out)
		}
		again, err := Canonicalize(out)
		if err != nil {
			t.Fatalf("Canonicalize(%q) error on its own output: %v", out, err)
		}
		if !bytes.Equal(again, out) {
			t.Fatalf("Canonicalize is not idempotent: %q -> %q -> %q", data, out, again)
		}
		// Input and output are the same JSON value. Numbers decode to float64
		// here, which is exactly what RFC 8785 compares them by.
		var in, canon any
		if err := json.Unmarshal(data, &in); err != nil {
			t.Fatalf("json.Unmarshal(%q): %v", data, err)
		}
		if err := json.Unmarshal(out, &canon); err != nil {
			t.Fatalf("json.Unmarshal(%q): %v", out, err)
		}
		if !reflect.DeepEqual(in, canon) {
			t.Fatalf("Canonicalize(%q) = %q, a different value (%#v, want %#v)", data, out, canon, in)
		}
	})
}

func FuzzFingerprintReorder(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		fp, err := Compute("hosted-ci", "run_suite", data)
		if err != nil {
			checkInputError(t, err)
			return
		}
		if len(data) == 0 {
			data = []byte(`{}`) // Compute's meaning of no arguments
		}
		var buf bytes.Buffer
		reencode(&buf, decodeNumbers(t, data))
		reordered, err := Compute("hosted-ci", "run_suite", buf.Bytes())
		if err != nil {
			t.Fatalf("Compute(%q) error after reordering %q: %v", buf.Bytes(), data, err)
		}
		if reordered != fp {
			t.Fatalf("Compute(%q) = %s, but reordered %q gives %s", data, fp, buf.Bytes(), reordered)
		}
		for _, other := range [][2]string{{"hosted-ci", "run_suites"}, {"hosted-cj", "run_suite"}, {"hosted-cirun_suite", ""}} {
			got, err := Compute(other[0], other[1], data)
			if err != nil {
				t.Fatalf("Compute(%q, %q, %q) error: %v", other[0], other[1], data, err)
			}
			if got == fp {
				t.Fatalf("Compute(%q, %q, %q) = %s, the same as for hosted-ci/run_suite", other[0], other[1], data, got)
			}
		}
	})
}

func ExampleCompute() {
	a, _ := Compute("hosted-ci", "run_suite", json.RawMessage(`{"suite":"settlement","shards":4}`))
	b, _ := Compute("hosted-ci", "run_suite", json.RawMessage(`{ "shards": 4.0, "suite": "settlement" }`))
	fmt.Println(a)
	fmt.Println(a == b)

	_, err := Compute("hosted-ci", "run_suite", json.RawMessage(`{"budget_micros":9007199254740993}`))
	fmt.Println(err)
	fmt.Println(errors.Is(err, ErrUnsafeInteger))
	// Output:
	// c68a4c156de47782736b9e7825aa808366d7e91df8722905638941910a5af66b
	// true
	// arguments.budget_micros: integer 9007199254740993 is outside ±(2^53-1), the range an IEEE-754 double holds exactly, so it cannot be compared exactly; send it as a string
	// true
}

func ExampleCanonicalize() {
	out, _ := Canonicalize([]byte(`{ "b": [1.0, -0, 1e-7], "a": "\u00e9" }`))
	fmt.Println(string(out))
	// Output:
	// {"a":"é","b":[1,0,1e-7]}
}
