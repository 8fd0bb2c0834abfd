package inert_test

import (
	"encoding/json"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/taskgate/taskgate/internal/inert"
)

// hostile holds the payloads every rule must make inert.
const (
	clearScreen = "\x1b[2J"
	setTitle    = "\x1b]0;pwned\a"
	image       = "![verdict: ready](http://x/y.png)"
	link        = "[click](javascript:alert(1))"
	bidi        = "bidi-\u202eexe.txt"
)

func TestTerminal(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "settlement-regression-842", "settlement-regression-842"},
		{"empty", "", ""},
		{"unicode letters stay", "zürich-東京-€", "zürich-東京-€"},
		{"clear screen", "a" + clearScreen + "b", `a\x1b[2Jb`},
		{"set title", setTitle, `\x1b]0;pwned\x07`},
		{"newline tab return", "a\nb\tc\rd", `a\nb\tc\rd`},
		{"NUL and DEL", "\x00\x7f", `\x00\x7f`},
		{"C1 CSI", "a\u009b2J", `a\u{9B}2J`},
		{"bidi override", bidi, `bidi-\u{202E}exe.txt`},
		{"bidi isolates and marks", "\u2066\u2067\u2068\u2069\u200e\u200f\u061c\u202a", `\u{2066}\u{2067}\u{2068}\u{2069}\u{200E}\u{200F}\u{61C}\u{202A}`},
		{"zero width", "a\u200bb\u200cc\u200dd\u2060e\ufeff", `a\u{200B}b\u{200C}c\u{200D}d\u{2060}e\u{FEFF}`},
		{"line separators", "a\u2028b\u2029c", `a\u{2028}b\u{2029}c`},
		{"tag characters", "ok\U000E0041", `ok\u{E0041}`},
		{"invalid UTF-8", "a\xffb\xc3", `a\xffb\xc3`},
		{"backslash stays", `C:\tmp`, `C:\tmp`},
		{"markdown untouched", image, image},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := inert.Terminal(tt.in)
			if got != tt.want {
				t.Errorf("Terminal(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if again := inert.Terminal(got); again != got {
				t.Errorf("Terminal is not idempotent: %q became %q", got, again)
			}
			for i, r := range got {
				if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == utf8.RuneError && !strings.Contains(tt.in, "\ufffd") || (r >= 0x200b && r <= 0x200f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0xfeff {
					t.Errorf("Terminal(%q) keeps %U at byte %d", tt.in, r, i)
				}
			}
		})
	}
}

func TestMarkdown(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain word", "ready", "ready"},
		{"hyphenated ID", "suite-7", `suite\-7`},
		{"image", image, `\!\[verdict\: ready\]\(http\://x/y\.png\)`},
		{"link", link, `\[click\]\(javascript\:alert\(1\)\)`},
		{"html", "<img src=x onerror=alert(1)>", `\<img src\=x onerror\=alert\(1\)\>`},
		{"entity spelling a bidi override", "&#x202E;", `\&\#x202E;`},
		{"emphasis and strike", "*a* _b_ ~~c~~", `\*a\* \_b\_ \~\~c\~\~`},
		{"math", "$\\color{green}ready$", `\$\\color\{green\}ready\$`},
		{"table break", "a|b", `a\|b`},
		{"heading at line start", "# verdict: ready", `\# verdict\: ready`},
		{"autolink", "www.example.com", `www\.example\.com`},
		{"newline stays on the line", "a\n# b", `a\\n\# b`},
		{"ANSI", clearScreen, `\\x1b\[2J`},
		{"bidi", bidi, `bidi\-\\u\{202E\}exe\.txt`},
		{"backslash", `a\b`, `a\\b`},
		{"unicode", "東京", "東京"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := inert.Markdown(tt.in); got != tt.want {
				t.Errorf("Markdown(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestMarkdownCode(t *testing.T) {
	tests := []struct {
		name, in, want, cell string
	}{
		{"plain", "suite-7", "`suite-7`", "`suite-7`"},
		{"empty", "", "", ""},
		{"image stays literal", image, "`" + image + "`", "`" + image + "`"},
		{"backtick inside", "a`b", "``a`b``", "``a`b``"},
		{"backtick run inside", "a``b`", "``` a``b` ```", "``` a``b` ```"},
		{"leading backtick", "`x", "`` `x ``", "`` `x ``"},
		{"leading and trailing space", " x ", "`  x  `", "`  x  `"},
		{"pipe", "a|b", "`a|b`", "`a\\|b`"},
		{"backslash before pipe", `a\|b`, "`a\\|b`", "`a\\x5c\\|b`"},
		{"newline", "a\nb", "`a\\nb`", "`a\\nb`"},
		{"ANSI", "x" + setTitle, "`x\\x1b]0;pwned\\x07`", "`x\\x1b]0;pwned\\x07`"},
		{"bidi", bidi, "`bidi-\\u{202E}exe.txt`", "`bidi-\\u{202E}exe.txt`"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := inert.MarkdownCode(tt.in); got != tt.want {
				t.Errorf("MarkdownCode(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if got := inert.MarkdownCodeCell(tt.in); got != tt.cell {
				t.Errorf("MarkdownCodeCell(%q) = %q, want %q", tt.in, got, tt.cell)
			}
		})
	}
}

func TestJSON(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", `{"a":"b"}`, `{"a":"b"}`},
		{"controls already escaped", `{"a":"\u001b[2J"}`, `{"a":"\u001b[2J"}`},
		{"bidi", "{\"a\":\"x\u202ey\"}", `{"a":"x\u202ey"}`},
		{"zero width and BOM", "{\"a\":\"\u200b\ufeff\"}", `{"a":"\u200b\ufeff"}`},
		{"C1", "{\"a\":\"\u009b\"}", `{"a":"\u009b"}`},
		{"tag character", "{\"a\":\"\U000E0041\"}", `{"a":"\udb40\udc41"}`},
		{"letters stay", `{"a":"zürich"}`, `{"a":"zürich"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := inert.JSON([]byte(tt.in))
			if string(got) != tt.want {
				t.Errorf("JSON(%q) = %q, want %q", tt.in, got, tt.want)
			}
			var in, out any
			if err := json.Unmarshal([]byte(tt.in), &in); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(got, &out); err != nil || !reflect.DeepEqual(in, out) {
				t.Errorf("JSON(%q) = %q is not the same value: %v, %v", tt.in, got, out, err)
			}
		})
	}
}

func TestURL(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"password and query", "http://svc:PASS@host/mcp?api_key=SECRET", "http://REDACTED:REDACTED@host/mcp?api_key=REDACTED"},
		{"user only", "https://TOKEN@host:8443/mcp", "https://REDACTED@host:8443/mcp"},
		{"every value, keys in order", "http://host/mcp?z=1&a=SECRET&a=2", "http://host/mcp?z=REDACTED&a=REDACTED&a=REDACTED"},
		{"bare parameter", "http://host/mcp?SECRETTOKEN&x=1", "http://host/mcp?REDACTED&x=REDACTED"},
		{"empty value", "http://host/mcp?k=", "http://host/mcp?k=REDACTED"},
		{"fragment", "http://host/mcp#access_token=SECRET", "http://host/mcp#REDACTED"},
		{"nothing to hide", "http://127.0.0.1:9000/mcp", "http://127.0.0.1:9000/mcp"},
		{"escaped password", "http://svc:P%40SS@host/", "http://REDACTED:REDACTED@host/"},
		{"unparseable", "http://svc:PA SS%zz@host/", "http://REDACTED"},
		{"command line", "npx -y server --port 3000", "npx -y server --port 3000"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := inert.URL(tt.in)
			if got != tt.want {
				t.Errorf("URL(%q) = %q, want %q", tt.in, got, tt.want)
			}
			for _, secret := range []string{"PASS", "SECRET", "TOKEN", "P%40SS"} {
				if strings.Contains(got, secret) {
					t.Errorf("URL(%q) = %q still holds %s", tt.in, got, secret)
				}
			}
			if again := inert.URL(got); again != got {
				t.Errorf("URL is not idempotent: %q became %q", got, again)
			}
		})
	}
}

func TestInvisible(t *testing.T) {
	for _, tc := range []struct {
		r    rune
		want bool
	}{
		{'a', false}, {' ', false}, {'~', false}, {'é', false}, {'中', false},
		{'\t', true}, {'\n', true}, {0x1b, true}, {0x7f, true}, {0x85, true}, {0x9b, true},
		{0x202e, true}, {0x2066, true}, {0x200b, true}, {0x200d, true}, {0xfeff, true}, {0x061c, true},
		{0x2028, true}, {0x2029, true}, {0xe0041, true},
	} {
		if got := inert.Invisible(tc.r); got != tc.want {
			t.Errorf("Invisible(%U) = %v, want %v", tc.r, got, tc.want)
		}
	}
}

func TestMarkdownCodeBlock(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{`{"a": 1}`, "```json\n{\"a\": 1}\n```\n"},
		{"x ``` y", "````json\nx ``` y\n````\n"},
		{"`````", "``````json\n`````\n``````\n"},
	} {
		if got := inert.MarkdownCodeBlock("json", tc.text); got != tc.want {
			t.Errorf("MarkdownCodeBlock(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

func TestShell(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"settlement-regression-842", "settlement-regression-842"},
		{"hosted_test.run_suite", "hosted_test.run_suite"},
		{"72.00", "72.00"},
		{"", "''"},
		{"a b", "'a b'"},
		{"it's", `'it'\''s'`},
		{"$(touch pwned)", "'$(touch pwned)'"},
		{"`id`;x&y|z>w<v*?[]~#!{}", "'`id`;x&y|z>w<v*?[]~#!{}'"},
		{"line\nbreak", "'line\nbreak'"},
		{clearScreen, "'" + clearScreen + "'"},
		{"é", "'é'"},
	} {
		got := inert.Shell(tc.in)
		if got != tc.want {
			t.Errorf("Shell(%q) = %q, want %q", tc.in, got, tc.want)
		}
		// The shell reads the word back as exactly the text.
		out, err := exec.Command("/bin/sh", "-c", "printf %s "+got).Output()
		if err != nil || string(out) != tc.in {
			t.Errorf("sh read Shell(%q) = %s as %q (%v)", tc.in, got, out, err)
		}
	}
}
