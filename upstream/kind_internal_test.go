package upstream

import "testing"

func TestKindOf(t *testing.T) {
	ended := make(chan struct{})
	close(ended)
	running := make(chan struct{})
	tap := &tapConn{}
	tests := []struct {
		name     string
		c        *conn
		overHTTP bool
		want     Kind
	}{
		{"HTTP, no session", nil, true, KindDown},
		{"HTTP, 2026-07-28", &conn{protocol: "2026-07-28"}, true, KindHTTPStateless},
		{"HTTP, 2025-11-25", &conn{protocol: "2025-11-25"}, true, KindHTTPSessions},
		{"HTTP, 2025-06-18", &conn{protocol: "2025-06-18"}, true, KindHTTPSessions},
		// An unknown version is not assumed to be stateless: Forward
		// sends only what it knows the upstream takes.
		{"HTTP, an unknown later version", &conn{protocol: "2027-01-01"}, true, KindHTTPSessions},
		{"stdio, no session", nil, false, KindDown},
		{"stdio, no tap", &conn{protocol: "2025-11-25", ended: running}, false, KindDown},
		{"stdio, the child's output ended", &conn{protocol: "2025-11-25", ended: ended, tap: tap}, false, KindDown},
		{"stdio, 2025-11-25", &conn{protocol: "2025-11-25", ended: running, tap: tap}, false, KindStdioSessions},
		{"stdio, 2025-06-18", &conn{protocol: "2025-06-18", ended: running, tap: tap}, false, KindStdioSessions},
		{"stdio, 2026-07-28", &conn{protocol: "2026-07-28", ended: running, tap: tap}, false, KindStdioStateless},
		// A stdio child asks in its answers from 2026-07-28 on, as
		// relayStdio reads its version.
		{"stdio, a later version", &conn{protocol: "2027-01-01", ended: running, tap: tap}, false, KindStdioStateless},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := kindOf(tt.c, tt.overHTTP); got != tt.want {
				t.Errorf("kindOf = %v, want %v", got, tt.want)
			}
		})
	}
}
