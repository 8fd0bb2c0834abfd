// Package inert holds the one escaping rule of each output kind that shows
// text taskgate did not write: operation IDs and arguments from agents, job
// IDs, charge IDs and answers from providers, URLs from configuration.
//
//   - [Terminal]: one line for a terminal, with control characters, invisible
//     format characters and invalid UTF-8 written as visible escapes.
//   - [Markdown], [MarkdownCode] and [MarkdownCodeCell]: GitHub-flavoured
//     Markdown text and code spans that render as exactly the characters
//     [Terminal] shows, so that no link, image, HTML, heading, list, table
//     break, emphasis or math comes from data.
//   - [MarkdownCodeBlock]: a fenced code block no text inside can close.
//   - [JSON]: JSON text shown as text (a code block), with the characters
//     [Terminal] escapes written as JSON escapes: the same value.
//   - [URL]: a URL with its userinfo and every query value replaced.
//   - [Shell]: a word of a command a person pastes into a POSIX shell.
//
// HTML needs no rule here: html/template escapes it, and the console shows
// each [Invisible] character as a marked escape.
//
// Every function is pure. This package must never drop a character without
// showing that it was there (a reader must see that the text was unusual),
// never shorten text, and never be applied to a model that is signed,
// stored or encoded as JSON or YAML: escaping belongs to rendering, where
// each output kind applies its rule in one place. URL is the exception,
// since a credential must not reach any rendering at all.
package inert

import (
	"bytes"
	"fmt"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Redacted replaces a credential or a query value in [URL].
const Redacted = "REDACTED"

// Terminal returns s as one line of terminal text. Each character that a
// terminal would act on or that hides or reorders text is written as a
// visible escape, and everything else as it is:
//
//   - newline, carriage return and tab as \n, \r and \t;
//   - other C0 controls and DEL as \x1b, \x7f, …;
//   - C1 controls (U+0080–U+009F), format characters (Unicode category Cf:
//     bidi controls such as U+202E and U+2066–U+2069, zero-width characters
//     such as U+200B–U+200D, U+2060 and U+FEFF, tag characters) and the
//     line and paragraph separators U+2028 and U+2029 as \u{202E};
//   - each byte of invalid UTF-8 as \xff.
//
// A backslash in s is shown as it is, so text that spells an escape reads
// the same as the escape; both are inert.
func Terminal(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			fmt.Fprintf(&b, `\x%02x`, s[i])
		} else if e, ok := visible(r); ok {
			b.WriteString(e)
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// Markdown returns s as GitHub-flavoured Markdown text that renders as
// Terminal(s): each ASCII punctuation character that Markdown gives a
// meaning anywhere is escaped with a backslash (all but , ; ' " / ? %), so
// no link, image, autolink, HTML, entity, emphasis, strikethrough, math,
// heading, list, quote or table cell break comes from s, wherever on a
// line it stands, a table cell included.
func Markdown(s string) string {
	var b strings.Builder
	for _, c := range []byte(Terminal(s)) {
		if strings.IndexByte(markdownPunctuation, c) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}

// MarkdownCode returns s as a Markdown code span that renders as
// Terminal(s), outside a table: its delimiters are longer than any run of
// backticks in s, and padded with a space when s starts or ends with a
// backtick or a space. It returns "" for "", which no code span can show.
func MarkdownCode(s string) string {
	s = Terminal(s)
	if s == "" {
		return ""
	}
	d := strings.Repeat("`", longestRun(s, '`')+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") || strings.HasPrefix(s, " ") || strings.HasSuffix(s, " ") {
		return d + " " + s + " " + d
	}
	return d + s + d
}

// MarkdownCodeCell is [MarkdownCode] inside a table cell, where a pipe
// ends the cell even within a code span unless it is escaped. A backslash
// right before a pipe would escape that escape, so it is shown as \x5c.
func MarkdownCodeCell(s string) string {
	s = Terminal(s)
	s = strings.ReplaceAll(s, `\|`, `\x5c|`)
	return strings.ReplaceAll(MarkdownCode(s), "|", `\|`)
}

// MarkdownCodeBlock returns text as a fenced code block tagged lang, whose
// fence no run of backticks inside text can close. The text is shown as it
// is, line breaks included: only text that an earlier rule made inert
// ([JSON], say) belongs in one.
func MarkdownCodeBlock(lang, text string) string {
	f := strings.Repeat("`", max(3, longestRun(text, '`')+1))
	return f + lang + "\n" + text + "\n" + f + "\n"
}

// JSON returns the JSON text raw with each character that [Terminal]
// would escape inside its strings written as a JSON \u escape (a
// surrogate pair beyond U+FFFF): the same JSON value, shown inert where
// JSON is displayed as text, such as a code block. Outside strings valid
// JSON holds no such character; invalid UTF-8 is left as it is, since
// raw is expected to be valid JSON.
func JSON(raw []byte) []byte {
	if !needsEscape(string(raw)) {
		return raw
	}
	var b bytes.Buffer
	for i := 0; i < len(raw); {
		r, n := utf8.DecodeRune(raw[i:])
		if _, ok := visible(r); ok && r >= utf8.RuneSelf {
			if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError {
				fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		} else {
			b.Write(raw[i : i+n])
		}
		i += n
	}
	return b.Bytes()
}

// URL returns raw with its credentials replaced by [Redacted]: the user
// and the password of its userinfo, each query parameter's value (its key
// kept, in order; a parameter without "=" is replaced whole, since it may
// be a token) and its fragment. Scheme, host and path are kept, so the
// path must hold no secret. For example
//
//	http://svc:PASS@host/mcp?api_key=SECRET&v=2
//
// becomes
//
//	http://REDACTED:REDACTED@host/mcp?api_key=REDACTED&v=REDACTED
//
// Text that is not an absolute URL (a command line) is returned as it is;
// text with "://" that does not parse keeps only its scheme.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		if scheme, _, ok := strings.Cut(raw, "://"); ok {
			return scheme + "://" + Redacted
		}
		return raw
	}
	if u.Scheme == "" || u.Opaque != "" {
		return raw
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(Redacted, Redacted)
		} else {
			u.User = url.User(Redacted)
		}
	}
	if u.RawQuery != "" || u.ForceQuery {
		params := strings.Split(u.RawQuery, "&")
		for i, p := range params {
			if key, _, ok := strings.Cut(p, "="); ok {
				params[i] = key + "=" + Redacted
			} else if p != "" {
				params[i] = Redacted
			}
		}
		u.RawQuery = strings.Join(params, "&")
	}
	if u.Fragment != "" {
		u.Fragment, u.RawFragment = Redacted, ""
	}
	return u.String()
}

// Shell returns s as one word of a POSIX shell command: as it is when
// every byte is a letter, a digit or one of _./:@%+=,- (and s is not
// empty), else in single quotes, with each single quote inside written as
// a closing quote, an escaped quote and an opening quote. The shell reads
// the word as exactly s, so a command built from caller-chosen values does
// nothing but what it names. A word that begins with "-" still reads as a
// flag to the command; a positional one goes after "--".
func Shell(s string) string {
	if s != "" && strings.Trim(s, shellSafe) == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellSafe are the bytes a POSIX shell gives no meaning to in a word.
const shellSafe = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:@%+=,-"

// markdownPunctuation is CommonMark's ASCII punctuation, each of which may
// be backslash-escaped and is then shown as itself, less those that mean
// nothing in GitHub-flavoured Markdown.
const markdownPunctuation = "!#$&()*+-.:<=>@[\\]^_`{|}~"

// Invisible reports whether r is a character that shows as something
// other than itself: a C0 or C1 control or DEL, which terminals obey, or a
// format character (bidi embeddings, overrides, isolates and marks,
// zero-width characters, the byte-order mark) or line or paragraph
// separator, which reorder or hide the text around them in every renderer
// (CVE-2021-42574). Every output kind shows such a character as an escape.
func Invisible(r rune) bool {
	switch {
	case r < 0x20 || r == 0x7f:
		return true
	case r < utf8.RuneSelf:
		return false
	}
	return unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r)
}

// visible is the escape Terminal writes for r, if r needs one.
func visible(r rune) (string, bool) {
	switch {
	case r == '\n':
		return `\n`, true
	case r == '\r':
		return `\r`, true
	case r == '\t':
		return `\t`, true
	case r < 0x20 || r == 0x7f:
		return fmt.Sprintf(`\x%02x`, r), true
	case Invisible(r):
		return fmt.Sprintf(`\u{%X}`, r), true
	}
	return "", false
}

// needsEscape is a fast path for the usual printable ASCII.
func needsEscape(s string) bool {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return true
		}
	}
	return false
}

func longestRun(s string, c byte) int {
	longest, n := 0, 0
	for i := range len(s) {
		if s[i] != c {
			n = 0
			continue
		}
		n++
		longest = max(longest, n)
	}
	return longest
}
