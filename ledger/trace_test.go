package ledger

import (
	"strings"
	"testing"
)

// TestAttemptTraceID: only a well-formed traceparent yields a trace ID, so
// that nothing but 32 lowercase hex digits reaches a receipt, a terminal
// or a page from it.
func TestAttemptTraceID(t *testing.T) {
	// Hostile text cut or padded to a trace ID's 32 characters.
	id := func(s string) string { return (s + strings.Repeat("a", 32))[:32] }
	tests := map[string]string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01": "4bf92f3577b34da6a3ce929d0e0e4736",
		"":                                    "",
		"00-4bf92f3577b34da6a3ce929d0e0e4736": "",
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01":                "",
		"00-" + id("\x1b[2J\x1b]0;title\x07") + "-00f067aa0ba902b7-01":           "",
		"00-" + id("../../../requests/1/approve?x=") + "-00f067aa0ba902b7-01":    "",
		"00-" + id("![verdict: ready](http://x/y.png)") + "-00f067aa0ba902b7-01": "",
		"00-" + id("bidi-\u202eexe.txt\u200b") + "-00f067aa0ba902b7-01":          "",
	}
	for tp, want := range tests {
		if got := (&Attempt{TraceParent: tp}).TraceID(); got != want {
			t.Errorf("TraceID(%q) = %q, want %q", tp, got, want)
		}
	}
}
