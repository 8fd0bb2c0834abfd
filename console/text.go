package console

import (
	"fmt"
	"html/template"
	"net/url"
	"strings"
)

// shownAsCode reports whether the console shows r as its code point rather
// than as itself: C0 and C1 controls and DEL (except the tab and newline
// that preformatted text keeps), and the characters that reorder or hide
// the text around them, bidi embeddings, overrides, isolates and marks and
// zero-width characters (CVE-2021-42574), so that "bidi-\u202etxt.exe"
// cannot read as "bidi-exe.txt".
func shownAsCode(r rune) bool {
	switch {
	case r == '\t' || r == '\n':
		return false
	case r < 0x20 || 0x7f <= r && r <= 0x9f:
		return true
	}
	switch r {
	case 0x061c, 0x200b, 0x200c, 0x200d, 0x200e, 0x200f, 0x2060, 0xfeff:
		return true
	}
	return 0x202a <= r && r <= 0x202e || 0x2066 <= r && r <= 0x2069
}

// codePoint is how a character shownAsCode reads on a page.
func codePoint(r rune) string { return fmt.Sprintf(`\u{%04X}`, r) }

// visible is s as HTML text in which every character shownAsCode is its
// code point, marked <span class="ctl"> so that it reads as a mark rather
// than as part of the data.
func visible(s string) template.HTML {
	if strings.IndexFunc(s, shownAsCode) < 0 {
		return template.HTML(template.HTMLEscapeString(s))
	}
	var b strings.Builder
	for _, r := range s {
		if shownAsCode(r) {
			b.WriteString(`<span class="ctl">` + codePoint(r) + `</span>`)
			continue
		}
		b.WriteString(template.HTMLEscapeString(string(r)))
	}
	return template.HTML(b.String())
}

// visibleText is s with every character shownAsCode as its code point,
// for text that holds no markup, such as a page's title.
func visibleText(s string) string {
	if strings.IndexFunc(s, shownAsCode) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if shownAsCode(r) {
			b.WriteString(codePoint(r))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// operationPath is the path of an operation's console page, its ID
// percent-encoded as one path segment, so that no ID can climb out of it
// or add a query. "." and ".." cannot be a path segment at all (browsers
// resolve "%2E%2E" as well), so an operation with such an ID, which only a
// ledger from before the ID rule can hold, is reached by its task ID.
func operationPath(operationID, taskID string) string {
	if (operationID == "." || operationID == "..") && taskID != "" {
		operationID = taskID
	}
	return Prefix + "/operations/" + url.PathEscape(operationID)
}
