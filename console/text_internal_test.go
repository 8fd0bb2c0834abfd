package console

import (
	"html/template"
	"testing"
)

func TestVisible(t *testing.T) {
	for _, tc := range []struct {
		in   string
		html template.HTML
		text string
	}{
		{"op-1", "op-1", "op-1"},
		{"<b>&\"", "&lt;b&gt;&amp;&#34;", "<b>&\""},
		{"bidi-\u202etxt.exe", `bidi-<span class="ctl">\u{202E}</span>txt.exe`, `bidi-\u{202E}txt.exe`},
		{"a\u200bb\ufeff", `a<span class="ctl">\u{200B}</span>b<span class="ctl">\u{FEFF}</span>`, `a\u{200B}b\u{FEFF}`},
		{"\u2066x\u2069", `<span class="ctl">\u{2066}</span>x<span class="ctl">\u{2069}</span>`, `\u{2066}x\u{2069}`},
		{"\x1b[2J", `<span class="ctl">\u{001B}</span>[2J`, `\u{001B}[2J`},
		{"a\u0085b\x7f", `a<span class="ctl">\u{0085}</span>b<span class="ctl">\u{007F}</span>`, `a\u{0085}b\u{007F}`},
		{"line\n\tnext", "line\n\tnext", "line\n\tnext"},
		{"é ü 日本", "é ü 日本", "é ü 日本"},
	} {
		if got := visible(tc.in); got != tc.html {
			t.Errorf("visible(%q) = %q, want %q", tc.in, got, tc.html)
		}
		if got := visibleText(tc.in); got != tc.text {
			t.Errorf("visibleText(%q) = %q, want %q", tc.in, got, tc.text)
		}
	}
}

func TestOperationPath(t *testing.T) {
	for _, tc := range []struct{ id, task, want string }{
		{"op-1", "task-a", "/console/operations/op-1"},
		{"../requests/1/approve?x=", "task-a", "/console/operations/..%2Frequests%2F1%2Fapprove%3Fx="},
		{"a#b c%", "task-a", "/console/operations/a%23b%20c%25"},
		{"bidi-\u202e", "task-a", "/console/operations/bidi-%E2%80%AE"},
		{"..", "task-a", "/console/operations/task-a"},
		{".", "task-a", "/console/operations/task-a"},
		{"...", "task-a", "/console/operations/..."},
	} {
		if got := operationPath(tc.id, tc.task); got != tc.want {
			t.Errorf("operationPath(%q, %q) = %q, want %q", tc.id, tc.task, got, tc.want)
		}
	}
}
