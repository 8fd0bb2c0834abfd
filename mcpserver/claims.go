package mcpserver

import (
	"regexp"
	"strings"
)

// An itemKind names what an upstream lists besides tools.
type itemKind string

const (
	kindPrompt   itemKind = "prompt"
	kindResource itemKind = "resource"
	kindTemplate itemKind = "resource template"
)

// An offer is one item an upstream listed, by the key clients know it by:
// a prompt's namespaced name, a resource's URI, a template's URI template.
type offer struct {
	upstream string
	key      string
}

// A clash is a key listed by two upstreams: owner keeps it, other's item
// is withheld.
type clash struct {
	kind  itemKind
	key   string
	owner string
	other string
}

// claim decides who owns each listed key. offers are in configuration
// order of their upstreams; the first upstream to list a key owns it, and
// each later upstream that lists it too is a clash, its item withheld, so
// that the outcome never depends on which upstream answered first. An
// upstream listing a key twice is no clash.
func claim(kind itemKind, offers []offer) (map[string]string, []clash) {
	owners := make(map[string]string, len(offers))
	var clashes []clash
	for _, o := range offers {
		owner, taken := owners[o.key]
		switch {
		case !taken:
			owners[o.key] = o.upstream
		case owner != o.upstream && !containsClash(clashes, o.key, o.upstream):
			clashes = append(clashes, clash{kind: kind, key: o.key, owner: owner, other: o.upstream})
		}
	}
	return owners, clashes
}

func containsClash(cs []clash, key, other string) bool {
	for _, c := range cs {
		if c.key == key && c.other == other {
			return true
		}
	}
	return false
}

// templatePattern is a URI template as a pattern for routing a URI to the
// upstream that listed the template: its literal text must match exactly,
// each {expression} matches any text. It is looser than RFC 6570 (an
// expression may match a "/"), which only matters between two upstreams
// whose templates overlap; the first in configuration order gets the URI.
func templatePattern(tmpl string) (*regexp.Regexp, bool) {
	var b strings.Builder
	b.WriteString("^")
	for rest := tmpl; rest != ""; {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			b.WriteString(regexp.QuoteMeta(rest))
			break
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return nil, false
		}
		b.WriteString(regexp.QuoteMeta(rest[:open]))
		b.WriteString(".*")
		rest = rest[open+end+1:]
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	return re, err == nil
}
