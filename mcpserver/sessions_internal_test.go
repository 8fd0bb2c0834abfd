package mcpserver

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestRelayableSession(t *testing.T) {
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	const idle = 30 * time.Minute
	const call = time.Minute // the longest a call may run
	tests := []struct {
		name    string
		s       *legacySession
		user    string
		maxCall time.Duration
		want    bool
	}{
		{"unknown session", nil, "acme", call, false},
		{"seen by the handler just now", &legacySession{userID: "acme", lastSDK: now}, "acme", call, true},
		{"another user", &legacySession{userID: "acme", lastSDK: now}, "globex", call, false},
		{"no user recorded, as the handler checks none", &legacySession{lastSDK: now}, "globex", call, true},
		{"client can be asked questions", &legacySession{userID: "acme", lastSDK: now, caps: []byte(`{"elicitation":{}}`)}, "acme", call, true},
		{"call ends just inside half the idle period", &legacySession{userID: "acme", lastSDK: now.Add(-idle/2 + call + time.Second)}, "acme", call, true},
		{"call could end past half the idle period", &legacySession{userID: "acme", lastSDK: now.Add(-idle/2 + call)}, "acme", call, false},
		{"a call as long as half the idle period", &legacySession{userID: "acme", lastSDK: now}, "acme", idle / 2, false},
		{"long idle but the handler is serving it", &legacySession{userID: "acme", lastSDK: now.Add(-time.Hour), sdkActive: 1}, "acme", call, true},
		{"the handler is serving it, but the call is too long", &legacySession{userID: "acme", sdkActive: 1}, "acme", idle / 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := relayableSession(tt.s, tt.user, now, idle, tt.maxCall); got != tt.want {
				t.Errorf("relayableSession = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestSessionIsKnownOnceItsIDIsSent: a session is followed from the moment
// its initialize answer, and so its ID, goes to the client, not only once
// the SDK's handler has returned: a client's first call may come between
// the two, and it would take the SDK path while the session is unknown.
func TestSessionIsKnownOnceItsIDIsSent(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "sessions", Version: "1"}, nil)
	l := newLegacySessions(server, time.Minute, time.Now)
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	release := make(chan struct{})
	// The handler of the initialize that opens the session stays held after
	// it has answered, as a busy machine may hold it.
	held := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sdk.ServeHTTP(w, r)
		if r.Header.Get(sessionIDHeader) == "" {
			<-release
		}
	})
	srv := httptest.NewServer(l.watch(held))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })

	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	id := resp.Header.Get(sessionIDHeader)
	if id == "" {
		t.Fatalf("initialize answered %s without a session ID", resp.Status)
	}
	if !l.known(id) {
		t.Fatal("the client has the session's ID, but the session is not followed until its initialize handler returns")
	}
}
