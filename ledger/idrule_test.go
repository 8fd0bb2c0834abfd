package ledger_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/taskgate/taskgate/ledger"
)

func TestCheckID(t *testing.T) {
	pattern := regexp.MustCompile(ledger.IDPattern)
	for _, tc := range []struct {
		name string
		id   string
		// offset and char are where and what the first offending
		// character is; offset -1 when the ID as a whole is refused.
		offset int
		char   string
		// say is in the message.
		say string
	}{
		{name: "plain", id: "settlement-regression-842", offset: ok},
		{name: "every allowed character", id: "AZaz09-._:@+=,~", offset: ok},
		{name: "derived", id: "derived-0123456789abcdef0123456789abcdef-1764662400", offset: ok},
		{name: "dots inside", id: "v1..2", offset: ok},
		{name: "three dots", id: "...", offset: ok},
		{name: "255 bytes", id: strings.Repeat("a", 255), offset: ok},
		{name: "one byte", id: "x", offset: ok},

		{name: "path climbing", id: "../requests/1/approve?x=", offset: 2, char: "/", say: `"/" (U+002F) at byte 2`},
		{name: "query", id: "op?x=1", offset: 2, char: "?", say: `"?" (U+003F) at byte 2`},
		{name: "space", id: "op 1", offset: 2, char: " ", say: `" " (U+0020) at byte 2`},
		{name: "hash", id: "#op", offset: 0, char: "#", say: `"#" (U+0023) at byte 0`},
		{name: "percent", id: "op%2F", offset: 2, char: "%", say: `"%" (U+0025) at byte 2`},
		{name: "backslash", id: `op\1`, offset: 2, char: `\`, say: `"\\" (U+005C) at byte 2`},
		{name: "markdown image", id: "![x](y)", offset: 0, char: "!", say: `"!" (U+0021) at byte 0`},
		{name: "newline", id: "op\nforged", offset: 2, char: "\n", say: `"\n" (U+000A) at byte 2`},
		{name: "escape", id: "op-\x1b[2J", offset: 3, char: "\x1b", say: `"\x1b" (U+001B) at byte 3`},
		{name: "delete", id: "op\x7f", offset: 2, char: "\x7f", say: `"\x7f" (U+007F) at byte 2`},
		{name: "NUL", id: "op\x00", offset: 2, char: "\x00", say: `"\x00" (U+0000) at byte 2`},
		{name: "non-ASCII", id: "opé", offset: 2, char: "é", say: `"\u00e9" (U+00E9) at byte 2`},
		{name: "bidi override", id: "bidi-\u202etxt.exe", offset: 5, char: "\u202e", say: `"\u202e" (U+202E) at byte 5`},
		{name: "zero width", id: "a\u200bb", offset: 1, char: "\u200b", say: `"\u200b" (U+200B) at byte 1`},
		{name: "not UTF-8", id: "op\xff", offset: 2, char: "\xff", say: `the byte 0xFF at byte 2`},
		{name: "first of several", id: "a b/c", offset: 1, char: " ", say: "at byte 1"},

		{name: "empty", id: "", offset: whole, say: "is empty"},
		{name: "256 bytes", id: strings.Repeat("a", 256), offset: whole, say: "256 bytes long; use at most 255"},
		{name: "dot", id: ".", offset: whole, say: `"." is a path's dot segment`},
		{name: "dot dot", id: "..", offset: whole, say: `".." is a path's dot segment`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ledger.CheckID("operation ID", tc.id)
			if matched := pattern.MatchString(tc.id); matched != (err == nil) && tc.id != "." && tc.id != ".." {
				t.Errorf("IDPattern matches %q: %v; CheckID says %v", tc.id, matched, err)
			}
			if tc.offset == ok {
				if err != nil {
					t.Fatalf("CheckID(%q) = %v, want nil", tc.id, err)
				}
				return
			}
			var ie *ledger.IDError
			if !errors.As(err, &ie) {
				t.Fatalf("CheckID(%q) = %v, want an *IDError", tc.id, err)
			}
			if ie.Offset != tc.offset || ie.Char != tc.char {
				t.Errorf("CheckID(%q) found %q at %d, want %q at %d", tc.id, ie.Char, ie.Offset, tc.char, tc.offset)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "the operation ID ") || !strings.Contains(msg, tc.say) || !strings.Contains(msg, ledger.IDPunctuation) {
				t.Errorf("CheckID(%q) says %q; want it to name the operation ID, say %q and list the alphabet", tc.id, msg, tc.say)
			}
			// The message is one line of printable ASCII, whatever the ID held.
			for i := range len(msg) {
				if msg[i] < 0x20 || msg[i] > 0x7e {
					t.Fatalf("CheckID(%q) says %q, which holds the byte %#x", tc.id, msg, msg[i])
				}
			}
		})
	}
}

const (
	ok    = -2
	whole = -1
)
