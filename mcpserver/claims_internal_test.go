package mcpserver

import (
	"reflect"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestClaim(t *testing.T) {
	for _, tt := range []struct {
		name    string
		offers  []offer
		owners  map[string]string
		clashes []clash
	}{
		{"nothing", nil, map[string]string{}, nil},
		{"distinct keys", []offer{{"a", "x"}, {"b", "y"}}, map[string]string{"x": "a", "y": "b"}, nil},
		{"the first in configuration order keeps a shared key",
			[]offer{{"a", "x"}, {"b", "x"}}, map[string]string{"x": "a"},
			[]clash{{kind: kindResource, key: "x", owner: "a", other: "b"}}},
		{"the order of offers decides, not the names",
			[]offer{{"b", "x"}, {"a", "x"}}, map[string]string{"x": "b"},
			[]clash{{kind: kindResource, key: "x", owner: "b", other: "a"}}},
		{"one upstream listing a key twice is no clash", []offer{{"a", "x"}, {"a", "x"}}, map[string]string{"x": "a"}, nil},
		{"a third upstream is a clash of its own",
			[]offer{{"a", "x"}, {"b", "x"}, {"c", "x"}, {"b", "x"}}, map[string]string{"x": "a"},
			[]clash{{kind: kindResource, key: "x", owner: "a", other: "b"}, {kind: kindResource, key: "x", owner: "a", other: "c"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			owners, clashes := claim(kindResource, tt.offers)
			if !reflect.DeepEqual(owners, tt.owners) || !reflect.DeepEqual(clashes, tt.clashes) {
				t.Errorf("claim = %v, %v; want %v, %v", owners, clashes, tt.owners, tt.clashes)
			}
		})
	}
}

func TestTemplatePattern(t *testing.T) {
	for _, tt := range []struct {
		tmpl, uri string
		want      bool
	}{
		{"test://items/{id}", "test://items/42", true},
		{"test://items/{id}", "test://items/", true},
		{"test://items/{id}", "test://other/42", false},
		{"test://items/{id}/data", "test://items/4/data", true},
		{"test://items/{id}/data", "test://items/4/meta", false},
		{"file:///{+path}", "file:///a/b.c", true},
		{"a.b/{x}", "aXb/1", false}, // literal text is literal
		{"{+uri}", "anything", true},
	} {
		re, ok := templatePattern(tt.tmpl)
		if !ok {
			t.Fatalf("templatePattern(%q) failed", tt.tmpl)
		}
		if got := re.MatchString(tt.uri); got != tt.want {
			t.Errorf("%q matches %q = %v; want %v", tt.tmpl, tt.uri, got, tt.want)
		}
	}
	if _, ok := templatePattern("test://items/{id"); ok {
		t.Error("an unclosed expression made a pattern")
	}
}

func TestAdvertise(t *testing.T) {
	all := &mcp.ServerCapabilities{
		Resources:   &mcp.ResourceCapabilities{Subscribe: true, ListChanged: true},
		Prompts:     &mcp.PromptCapabilities{ListChanged: true},
		Completions: &mcp.CompletionCapabilities{},
	}
	toolsOnly := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}
	for _, tt := range []struct {
		name      string
		upstreams []*mcp.ServerCapabilities
		want      *mcp.ServerCapabilities
	}{
		{"no upstreams", nil, &mcp.ServerCapabilities{}},
		{"tools only", []*mcp.ServerCapabilities{toolsOnly}, &mcp.ServerCapabilities{}},
		{"not connected yet: all taskgate carries", []*mcp.ServerCapabilities{toolsOnly, nil}, all},
		{"resources without subscribe or list changes",
			[]*mcp.ServerCapabilities{toolsOnly, {Resources: &mcp.ResourceCapabilities{}}},
			&mcp.ServerCapabilities{Resources: &mcp.ResourceCapabilities{ListChanged: true}}},
		{"the union of two",
			[]*mcp.ServerCapabilities{{Prompts: &mcp.PromptCapabilities{}}, {Resources: &mcp.ResourceCapabilities{Subscribe: true}, Completions: &mcp.CompletionCapabilities{}}},
			all},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := &mcp.ServerCapabilities{Resources: &mcp.ResourceCapabilities{Subscribe: true}, Completions: &mcp.CompletionCapabilities{}}
			advertise(got, tt.upstreams)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("advertise = %+v; want %+v", got, tt.want)
			}
		})
	}
}
