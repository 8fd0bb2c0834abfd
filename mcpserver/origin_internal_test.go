package mcpserver

import "testing"

func TestOriginAllowed(t *testing.T) {
	allowed := allowedOrigins("https://gw.example.com", []string{"https://Console.Example.com", "http://tools.example.com:8080/"})
	tests := []struct {
		name, origin, host string
		loopback           bool
		want               bool
	}{
		{"no origin: not a browser", "", "gw.internal:8931", false, true},
		{"the request's own host", "http://gw.internal:8931", "gw.internal:8931", false, true},
		{"own host over https", "https://gw.internal:8931", "GW.internal:8931", false, true},
		{"own host, default port written in Host", "https://gw.internal", "gw.internal:443", false, true},
		{"own host name, other port", "http://gw.internal:9999", "gw.internal:8931", false, false},
		{"public_url behind a proxy", "https://gw.example.com", "10.0.0.5:8931", false, true},
		{"public_url with its default port", "https://gw.example.com:443", "10.0.0.5:8931", false, true},
		{"public_url's host over http", "http://gw.example.com", "10.0.0.5:8931", false, false},
		{"configured, in another case", "https://console.example.com", "gw.internal:8931", false, true},
		{"configured with a port", "http://tools.example.com:8080", "gw.internal:8931", false, true},
		{"configured host, other port", "http://tools.example.com", "gw.internal:8931", false, false},
		{"configured host, other scheme", "http://console.example.com", "gw.internal:8931", false, false},
		{"another site", "http://evil.example", "gw.internal:8931", false, false},
		{"a rebound name", "http://evil.example", "127.0.0.1:8931", true, false},
		{"a suffix of an allowed host", "https://console.example.com.evil.example", "gw.internal:8931", false, false},
		{"loopback origin on a loopback listener", "http://localhost:5173", "127.0.0.1:8931", true, true},
		{"loopback address origin on a loopback listener", "http://127.0.0.1:6274", "localhost:8931", true, true},
		{"IPv6 loopback origin on a loopback listener", "http://[::1]:3000", "127.0.0.1:8931", true, true},
		{"loopback origin on another listener", "http://localhost:5173", "gw.internal:8931", false, false},
		{"opaque origin", "null", "gw.internal:8931", false, false},
		{"not http", "file://", "gw.internal:8931", false, false},
		{"extension scheme", "chrome-extension://abcdef", "gw.internal:8931", false, false},
		{"with a path", "https://console.example.com/app", "gw.internal:8931", false, false},
		{"with credentials", "https://user@console.example.com", "gw.internal:8931", false, false},
		{"unreadable", "http://%zz", "gw.internal:8931", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := originAllowed(tt.origin, tt.host, tt.loopback, allowed); got != tt.want {
				t.Errorf("originAllowed(%q, %q, loopback %v) = %v, want %v", tt.origin, tt.host, tt.loopback, got, tt.want)
			}
		})
	}
}
