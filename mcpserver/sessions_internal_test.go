package mcpserver

import (
	"testing"
	"time"
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
