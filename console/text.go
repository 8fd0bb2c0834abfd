package console

import (
	"fmt"
	"html/template"
	"net/url"
	"strings"

	"github.com/taskgate/taskgate/internal/inert"
)

// shownAsCode reports whether the console shows r as its code point rather
// than as itself: every character inert.Invisible names, except the tab and
// newline that preformatted text keeps, so that "bidi-\u202etxt.exe"
// cannot read as "bidi-exe.txt".
func shownAsCode(r rune) bool {
	return r != '\t' && r != '\n' && inert.Invisible(r)
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
