package mcpserver

import (
	"testing"
	"time"
)

func TestRelayableSession(t *testing.T) {
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	idle := 30 * time.Minute
	tests := []struct {
		name string
		s    *legacySession
		user string
		want bool
	}{
		{"unknown session", nil, "acme", false},
		{"seen by the handler just now", &legacySession{userID: "acme", lastSDK: now}, "acme", true},
		{"another user", &legacySession{userID: "acme", lastSDK: now}, "globex", false},
		{"no user recorded, as the handler checks none", &legacySession{lastSDK: now}, "globex", true},
		{"client can be asked questions", &legacySession{userID: "acme", lastSDK: now, canElicit: true}, "acme", false},
		{"just under half the idle period", &legacySession{userID: "acme", lastSDK: now.Add(-idle/2 + time.Second)}, "acme", true},
		{"half the idle period since the handler saw it", &legacySession{userID: "acme", lastSDK: now.Add(-idle / 2)}, "acme", false},
		{"long idle but the handler is serving it", &legacySession{userID: "acme", lastSDK: now.Add(-time.Hour), sdkActive: 1}, "acme", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := relayableSession(tt.s, tt.user, now, idle); got != tt.want {
				t.Errorf("relayableSession = %v, want %v", got, tt.want)
			}
		})
	}
}
