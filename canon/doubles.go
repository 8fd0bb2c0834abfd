package canon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// CheckDoubles applies one rule of the package to a JSON value that is not
// fingerprinted, such as the arguments of a call passed straight through: no
// number may overflow an IEEE-754 double. Decoders that read numbers as
// doubles, the go-sdk's among them, refuse such a value as a whole, so the
// caller can name the offending value instead. The error is an [*InputError]
// that unwraps to [ErrUnsafeInteger], its path rooted at root. It does not
// check the grammar: give it JSON that has been read already.
//
// It allocates nothing unless a number has an exponent or more than 308
// digits, the only ones that can overflow, so it is cheap on every request.
func CheckDoubles(raw []byte, root string) error {
	if !hasOverflow(raw) {
		return nil
	}
	return overflowAt(raw, root)
}

// hasOverflow reports whether any number outside the strings of raw
// overflows a double, scanning the bytes once.
func hasOverflow(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '"':
			for i++; i < len(raw) && raw[i] != '"'; i++ {
				if raw[i] == '\\' {
					i++
				}
			}
		case c == '-' || '0' <= c && c <= '9':
			j := i + 1
			for j < len(raw) && isNumberByte(raw[j]) {
				j++
			}
			if overflows(raw[i:j]) {
				return true
			}
			i = j - 1
		}
	}
	return false
}

func isNumberByte(c byte) bool {
	return '0' <= c && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}

// overflows reports whether the number literal lit is beyond a double's
// range. Without an exponent it needs at least 309 digits to be.
func overflows(lit []byte) bool {
	if len(lit) < 309 && bytes.IndexAny(lit, "eE") < 0 {
		return false
	}
	f, _ := strconv.ParseFloat(string(lit), 64)
	return math.IsInf(f, 0)
}

// overflowAt walks raw to find the path of its first overflowing number.
func overflowAt(raw []byte, root string) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var stack []frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		top := len(stack) - 1
		if top >= 0 && stack[top].object && !stack[top].hasKey {
			if key, ok := tok.(string); ok {
				stack[top].key, stack[top].hasKey = key, true
				continue
			}
		}
		switch t := tok.(type) {
		case json.Delim:
			if t == '[' || t == '{' {
				stack = append(stack, frame{object: t == '{'})
				continue
			}
			stack = stack[:top]
		case json.Number:
			if overflows([]byte(t)) {
				return &InputError{
					Path:   path(root, stack),
					Reason: fmt.Sprintf("number %s overflows an IEEE-754 double, so it cannot be read as a number; send it as a string", truncate(string(t))),
					Err:    ErrUnsafeInteger,
				}
			}
		}
		if len(stack) == 0 {
			return nil
		}
		if f := &stack[len(stack)-1]; f.object {
			f.hasKey = false
		} else {
			f.index++
		}
	}
}
