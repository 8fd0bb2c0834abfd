package mcpserver

import (
	"regexp"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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

// advertise sets what caps says of resources, prompts and completion to
// the union of what the upstreams offer, given each configured upstream's
// capabilities (nil for one that has not connected yet). taskgate carries
// list changes of its own (it notices them when it lists), so resources and
// prompts are advertised with listChanged whenever they are at all. While
// an upstream has not connected, it may offer anything, and everything
// taskgate carries is advertised: a client that connects first still
// learns of it, and until then it lists nothing.
func advertise(caps *mcp.ServerCapabilities, upstreams []*mcp.ServerCapabilities) {
	var resources, subscribe, prompts, completions bool
	for _, u := range upstreams {
		if u == nil {
			resources, subscribe, prompts, completions = true, true, true, true
			break
		}
		resources = resources || u.Resources != nil
		subscribe = subscribe || u.Resources != nil && u.Resources.Subscribe
		prompts = prompts || u.Prompts != nil
		completions = completions || u.Completions != nil
	}
	caps.Resources, caps.Prompts, caps.Completions = nil, nil, nil
	if resources {
		caps.Resources = &mcp.ResourceCapabilities{Subscribe: subscribe, ListChanged: true}
	}
	if prompts {
		caps.Prompts = &mcp.PromptCapabilities{ListChanged: true}
	}
	if completions {
		caps.Completions = &mcp.CompletionCapabilities{}
	}
}
