package canon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// frame is one open array or object during validation.
type frame struct {
	object bool
	keys   map[string]struct{} // keys seen so far in this object
	key    string              // the key whose value is being read
	hasKey bool                // a key has been read and its value has not
	index  int                 // array: index of the element being read
}

// validate checks raw against the package rules in one streaming pass and
// returns the kind of its top-level value ("an object", "an array", ...). root
// names the value in error paths.
//
// encoding/json's Decoder checks the grammar, but it replaces invalid UTF-8
// and lone surrogates with U+FFFD and keeps the last of duplicate keys, so
// those are checked here on the raw bytes of each string token.
func validate(raw []byte, root string) (string, error) {
	if len(raw) > MaxSize {
		return "", &InputError{
			Path:   root,
			Reason: fmt.Sprintf("the value is %d bytes, more than the %d-byte (1 MiB) limit; send a smaller value", len(raw), MaxSize),
			Err:    ErrTooLarge,
		}
	}
	if len(bytes.TrimLeft(raw, " \t\r\n")) == 0 {
		return "", &InputError{Path: root, Reason: "the input is empty; send one JSON value", Err: ErrInvalidJSON}
	}

	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var (
		stack []frame
		kind  string
	)
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return "", syntaxError(root, stack, err)
		}
		end := dec.InputOffset()
		if kind == "" {
			kind = kindOf(tok)
		}

		top := len(stack) - 1
		if top >= 0 && stack[top].object && !stack[top].hasKey {
			// In an object with no pending key, the token is a key or '}'.
			if key, ok := tok.(string); ok {
				f := &stack[top]
				if reason := checkString(raw, start, end); reason != "" {
					return "", &InputError{Path: path(root, stack), Reason: "an object key " + reason, Err: ErrInvalidUTF8}
				}
				f.key, f.hasKey = key, true
				if _, dup := f.keys[key]; dup {
					return "", &InputError{
						Path:   path(root, stack),
						Reason: fmt.Sprintf("key %s appears more than once in the same object (keys are compared after unescaping); send each key once", quoteForError(key)),
						Err:    ErrDuplicateKey,
					}
				}
				f.keys[key] = struct{}{}
				continue
			}
		}

		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '[', '{':
				if len(stack) >= MaxDepth {
					return "", &InputError{
						Path:   path(root, stack),
						Reason: fmt.Sprintf("arrays and objects nest deeper than %d levels; send a flatter value", MaxDepth),
						Err:    ErrTooDeep,
					}
				}
				f := frame{object: t == '{'}
				if f.object {
					f.keys = make(map[string]struct{})
				}
				stack = append(stack, f)
				continue
			default: // ']' or '}': the decoder has checked it matches.
				stack = stack[:top]
			}
		case string:
			if reason := checkString(raw, start, end); reason != "" {
				return "", &InputError{Path: path(root, stack), Reason: "the string " + reason, Err: ErrInvalidUTF8}
			}
		case json.Number:
			if reason := checkNumber(string(t)); reason != "" {
				return "", &InputError{Path: path(root, stack), Reason: reason, Err: ErrUnsafeInteger}
			}
		}

		// A value has ended: advance the enclosing container, or finish.
		if len(stack) == 0 {
			break
		}
		f := &stack[len(stack)-1]
		if f.object {
			f.hasKey = false
		} else {
			f.index++
		}
	}

	if rest := bytes.TrimLeft(raw[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return "", &InputError{
			Path:   root,
			Reason: fmt.Sprintf("unexpected data after the JSON value at offset %d; send exactly one JSON value", len(raw)-len(rest)),
			Err:    ErrInvalidJSON,
		}
	}
	return kind, nil
}

// syntaxError turns a decoder error into an InputError at the current path.
func syntaxError(root string, stack []frame, err error) error {
	var reason string
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		reason = fmt.Sprintf("not valid JSON: %s (at offset %d); send well-formed JSON", se.Error(), se.Offset)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		reason = "not valid JSON: the input ends before the value is complete; send well-formed JSON"
	default:
		reason = fmt.Sprintf("not valid JSON: %v; send well-formed JSON", err)
	}
	return &InputError{Path: path(root, stack), Reason: reason, Err: ErrInvalidJSON}
}

// kindOf names the JSON type of a value's first token, for error messages.
func kindOf(tok json.Token) string {
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			return "an object"
		}
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	default:
		return "null"
	}
}

// checkNumber reports why a number literal cannot be compared exactly, or ""
// when it can. Every double of magnitude 2^53 or more is an integer, and from
// 2^53 on neighbouring integers share a double, so rejecting a value beyond
// 2^53-1 (for a double, the same as >= 2^53) rejects exactly the integers that
// could be merged (9007199254740993 with 9007199254740992, 1e16 with 1e16+1),
// while every smaller integer is held exactly.
func checkNumber(lit string) string {
	// The decoder has checked the grammar, so the only possible error is
	// strconv.ErrRange on overflow, which comes with ±Inf.
	f, _ := strconv.ParseFloat(lit, 64)
	switch {
	case math.IsInf(f, 0):
		return fmt.Sprintf("number %s is outside ±(2^53-1) and overflows an IEEE-754 double, so it cannot be compared exactly; send it as a string", truncate(lit))
	case math.Abs(f) > MaxSafeInteger:
		what := "number " + truncate(lit) + " is an integer"
		if strings.IndexAny(lit, ".eE") < 0 {
			what = "integer " + truncate(lit) + " is"
		}
		return what + " outside ±(2^53-1), the range an IEEE-754 double holds exactly, so it cannot be compared exactly; send it as a string"
	}
	return ""
}

// checkString reports why the string token in raw[start:end] is not valid
// Unicode, or "" when it is. The span may begin with whitespace and a ',' or
// ':', none of which contain '"', so the token starts at the first quote.
func checkString(raw []byte, start, end int64) string {
	span := raw[start:end]
	q := bytes.IndexByte(span, '"')
	if q < 0 {
		return ""
	}
	s := span[q:]
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size <= 1 {
			return fmt.Sprintf("is not valid UTF-8 (byte 0x%02x at offset %d); send text as UTF-8", s[i], start+int64(q+i))
		}
		i += size
	}
	for i := 0; i+1 < len(s); i++ {
		if s[i] != '\\' {
			continue
		}
		if s[i+1] != 'u' {
			i++ // skip the escaped character, which may itself be '\\'
			continue
		}
		r, ok := hex4(s, i+2)
		if !ok {
			i++
			continue
		}
		if utf16.IsSurrogate(r) {
			if r < 0xDC00 {
				if low, ok := hex4(s, i+8); ok && s[i+6] == '\\' && s[i+7] == 'u' && low >= 0xDC00 && low <= 0xDFFF {
					i += 11 // the whole pair
					continue
				}
			}
			return fmt.Sprintf(`contains \u%04x, a lone UTF-16 surrogate that is not a Unicode character (offset %d); send valid UTF-8 text`, r, start+int64(q+i))
		}
		i += 5
	}
	return ""
}

// hex4 reads the four hex digits at s[i:i+4].
func hex4(s []byte, i int) (rune, bool) {
	if i < 0 || i+4 > len(s) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(s[i:i+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	return rune(v), true
}

// path renders the JSON path of the value being read, such as
// arguments.items[2].n or arguments["a b"].
func path(root string, stack []frame) string {
	var b strings.Builder
	b.WriteString(root)
	for _, f := range stack {
		switch {
		case !f.object:
			fmt.Fprintf(&b, "[%d]", f.index)
		case !f.hasKey:
			// Between members: the path is the object itself.
		case isIdentifier(f.key):
			b.WriteByte('.')
			b.WriteString(f.key)
		default:
			b.WriteByte('[')
			b.WriteString(quoteForError(f.key))
			b.WriteByte(']')
		}
	}
	return b.String()
}

// isIdentifier reports whether key can be written after a dot in a path.
func isIdentifier(key string) bool {
	if key == "" || len(key) > maxErrorText {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// maxErrorText bounds how much of a key or number an error message quotes, so
// that one request cannot write megabytes into a log line.
const maxErrorText = 64

// truncate shortens s to at most maxErrorText bytes, on a rune boundary.
func truncate(s string) string {
	if len(s) <= maxErrorText {
		return s
	}
	cut := maxErrorText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:cut], len(s))
}

// quoteForError quotes a key for an error message, escaping control
// characters so that it cannot break a log line.
func quoteForError(s string) string {
	if len(s) <= maxErrorText {
		return strconv.Quote(s)
	}
	cut := maxErrorText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(s[:cut]), len(s))
}
