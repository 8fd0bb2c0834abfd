// Package canon holds the fingerprint of an operation's request — upstream
// server, tool and arguments — and the rules that make that fingerprint
// trustworthy.
//
// A fingerprint is the lowercase hex SHA-256 of the RFC 8785 (JCS) canonical
// JSON of {"server":…, "tool":…, "arguments":…}. Requests that spell the same
// JSON value differently — key order, whitespace, string escapes, 1.0 for 1 —
// get the same fingerprint; requests with different values get different
// ones. Acceptance compares fingerprints to tell an attached retry from an
// operation ID reused with different arguments, so the fingerprint must never
// call two different requests equal.
//
// # Rules
//
// RFC 8785 turns every number into an IEEE-754 double, and it does not reject
// duplicate keys or bound its input. Before canonicalising, canon therefore
// rejects, naming the JSON path of the offending value:
//
//   - duplicate object keys at any depth, compared after unescaping, so
//     {"a":1,"\u0061":2} is a duplicate ([ErrDuplicateKey]);
//   - integers outside ±(2^53-1), whether written as 9007199254740993, 1e16 or
//     1e400: a double cannot tell 9007199254740993 from 9007199254740992, so
//     such numbers would be silently merged ([ErrUnsafeInteger]). Money and
//     large IDs belong in strings or integer minor units within range;
//   - invalid UTF-8, including escaped lone surrogates such as "\ud800"
//     ([ErrInvalidUTF8]);
//   - anything that is not exactly one JSON value ([ErrInvalidJSON]);
//   - arrays and objects nested deeper than [MaxDepth] ([ErrTooDeep]);
//   - input larger than [MaxSize] ([ErrTooLarge]);
//   - for [Compute], arguments that are not a JSON object ([ErrNotObject]).
//
// Every such error is an [*InputError]: the caller sent something that cannot
// be fingerprinted, and the message says what to send instead. [CheckDoubles]
// applies the overflow rule alone to a value that is not fingerprinted but
// must still be readable as doubles, such as a pass-through call's arguments.
//
// What RFC 8785 merges on purpose stays merged: 1, 1.0 and 1e0 are the same
// number, -0 is 0, and a fraction is compared by its nearest double, so 0.1 and
// 0.1000000000000000000001 are equal and a value too small for a double, such
// as 1e-400, equals 0.
//
// canon is pure computation: it never touches storage, the network or logging.
package canon

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

const (
	// MaxSize is the largest input, in bytes, that [Canonicalize] accepts and
	// the largest arguments [Compute] accepts: 1 MiB. It bounds the memory and
	// time one request can spend on canonicalisation.
	MaxSize = 1 << 20

	// MaxDepth is the deepest nesting of arrays and objects accepted. The
	// outermost array or object is depth 1, so the arguments object of
	// [Compute] counts as one level.
	MaxDepth = 64

	// MaxSafeInteger is 2^53-1, the largest integer magnitude for which an
	// IEEE-754 double holds the integer and both its neighbours exactly
	// (RFC 7493 I-JSON, section 2.2). Integers beyond it are rejected.
	MaxSafeInteger = 1<<53 - 1
)

// Sentinel errors. Every error canon returns is an [*InputError] that unwraps
// to exactly one of these.
var (
	ErrDuplicateKey  = errors.New("duplicate object key")
	ErrUnsafeInteger = errors.New("integer beyond ±(2^53-1)")
	ErrInvalidUTF8   = errors.New("invalid UTF-8")
	ErrInvalidJSON   = errors.New("invalid JSON")
	ErrTooDeep       = errors.New("nesting too deep")
	ErrTooLarge      = errors.New("input too large")
	ErrNotObject     = errors.New("arguments are not a JSON object")
)

// InputError reports a value that cannot be canonicalised: where it is, what
// is wrong with it and what to send instead. It unwraps to one of the
// sentinel errors. Its message never quotes string values, which may be
// secrets; it may quote object keys and numbers, truncated.
type InputError struct {
	// Path is the JSON path of the offending value, such as
	// arguments.items[2].n. A bare value passed to [Canonicalize] is rooted
	// at "$"; arguments passed to [Compute] at "arguments".
	Path string
	// Reason says what is wrong and what to send instead.
	Reason string
	// Err is the sentinel error this input error unwraps to.
	Err error
}

func (e *InputError) Error() string { return e.Path + ": " + e.Reason }

func (e *InputError) Unwrap() error { return e.Err }

// Canonicalize returns the RFC 8785 (JCS) canonical form of one JSON value,
// after checking it against the package rules. Any JSON value is accepted,
// including a bare string or number.
func Canonicalize(raw []byte) ([]byte, error) {
	if _, err := validate(raw, "$"); err != nil {
		return nil, err
	}
	return transform(raw)
}

// Fingerprint is the lowercase hex SHA-256 of the canonical JSON of
// {"server":…, "tool":…, "arguments":…}.
type Fingerprint string

// Compute returns the fingerprint of calling tool on the upstream server with
// arguments. Arguments must be a JSON object; empty or nil arguments mean {}.
// The caller removes gateway-reserved fields (such as the operation ID
// argument) before computing, so that they do not take part in the
// comparison.
func Compute(server, tool string, arguments json.RawMessage) (Fingerprint, error) {
	if err := checkName("server", server); err != nil {
		return "", err
	}
	if err := checkName("tool", tool); err != nil {
		return "", err
	}
	if len(arguments) == 0 {
		arguments = json.RawMessage(`{}`)
	}
	kind, err := validate(arguments, "arguments")
	if err != nil {
		return "", err
	}
	if kind != "an object" {
		return "", &InputError{
			Path:   "arguments",
			Reason: fmt.Sprintf("a tool's arguments must be a JSON object, got %s; send the arguments as an object, or {} when there are none", kind),
			Err:    ErrNotObject,
		}
	}

	// server and tool are valid UTF-8, so json.Marshal quotes them without
	// replacing anything; jcs then normalises the escaping.
	serverJSON, _ := json.Marshal(server)
	toolJSON, _ := json.Marshal(tool)
	var envelope bytes.Buffer
	envelope.Grow(len(arguments) + len(serverJSON) + len(toolJSON) + 32)
	envelope.WriteString(`{"server":`)
	envelope.Write(serverJSON)
	envelope.WriteString(`,"tool":`)
	envelope.Write(toolJSON)
	envelope.WriteString(`,"arguments":`)
	envelope.Write(arguments)
	envelope.WriteString(`}`)

	canonical, err := transform(envelope.Bytes())
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canonical)
	return Fingerprint(hex.EncodeToString(sum[:])), nil
}

// checkName rejects a server or tool name that is not valid UTF-8: encoding
// it would replace the bad bytes with U+FFFD and merge distinct names.
func checkName(field, name string) error {
	if utf8.ValidString(name) {
		return nil
	}
	return &InputError{
		Path:   field,
		Reason: fmt.Sprintf("the %s name is not valid UTF-8; send the name as UTF-8 text", field),
		Err:    ErrInvalidUTF8,
	}
}

// transform runs the RFC 8785 transform on input that has already passed
// validate. jcs enforces a subset of the same grammar, so a failure here means
// the two parsers disagree; it is still reported as bad input.
func transform(raw []byte) ([]byte, error) {
	out, err := jcs.Transform(raw)
	if err != nil {
		return nil, &InputError{
			Path:   "$",
			Reason: fmt.Sprintf("the value cannot be canonicalised (%v); send plain JSON", err),
			Err:    ErrInvalidJSON,
		}
	}
	return out, nil
}
