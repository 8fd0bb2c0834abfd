package ledger

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// IDPunctuation is what an operation ID or a run ID may hold besides ASCII
// letters and digits. With them an ID is safe unquoted in a URL path
// segment, a shell word, a terminal line and Markdown text, so no display
// or route built from one can be steered by it.
const IDPunctuation = "-._:@+=,~"

// MaxIDBytes is the longest an operation ID or a run ID may be.
const MaxIDBytes = 255

// IDPattern is the rule of [CheckID] as a regular expression, for a JSON
// Schema "pattern" that shows a model which IDs it may choose; only the
// dot segments "." and "..", which it matches, CheckID refuses as well.
const IDPattern = `^[A-Za-z0-9._:@+=,~-]{1,255}$`

// IDError is why [CheckID] refused an ID.
type IDError struct {
	// Offset is the byte offset of the first character outside the
	// alphabet; -1 when the ID as a whole is refused (empty, too long, a
	// dot segment).
	Offset int
	// Char is that character, or the lone byte when it is not UTF-8.
	Char string
	msg  string
}

func (e *IDError) Error() string { return e.msg }

// CheckID reports whether id may name an operation or a run: 1 to
// MaxIDBytes bytes of ASCII letters, digits and IDPunctuation, and not "."
// or "..", which a URL path would resolve away. what names the ID in the
// message ("operation ID"). The message is printable ASCII whatever id
// holds, and says what to send instead.
func CheckID(what, id string) error {
	rule := fmt.Sprintf("use only ASCII letters, digits and %s (1 to %d bytes)", IDPunctuation, MaxIDBytes)
	switch {
	case id == "":
		return &IDError{Offset: -1, msg: fmt.Sprintf("the %s is empty; %s", what, rule)}
	case len(id) > MaxIDBytes:
		return &IDError{Offset: -1, msg: fmt.Sprintf("the %s is %d bytes long; use at most %d bytes of ASCII letters, digits and %s", what, len(id), MaxIDBytes, IDPunctuation)}
	case id == "." || id == "..":
		return &IDError{Offset: -1, msg: fmt.Sprintf("the %s %q is a path's dot segment, which cannot name anything; choose another: %s", what, id, rule)}
	}
	i := strings.IndexFunc(id, func(r rune) bool { return !idChar(r) })
	if i < 0 {
		return nil
	}
	r, n := utf8.DecodeRuneInString(id[i:])
	e := &IDError{Offset: i, Char: id[i : i+n]}
	if r == utf8.RuneError && n == 1 {
		e.msg = fmt.Sprintf("the %s holds the byte 0x%02X at byte %d, which is not UTF-8; %s", what, id[i], i, rule)
	} else {
		e.msg = fmt.Sprintf("the %s holds %+q (%U) at byte %d; %s", what, string(r), r, i, rule)
	}
	return e
}

// idChar reports whether r may appear in an operation ID or a run ID.
func idChar(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r < utf8.RuneSelf && strings.ContainsRune(IDPunctuation, r)
}
