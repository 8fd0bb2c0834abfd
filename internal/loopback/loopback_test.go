package loopback

import "testing"

func TestHost(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want bool
	}{
		{"127.0.0.1", true},
		{"127.0.0.1:8931", true},
		{"127.1.2.3:80", true},
		{"localhost", true},
		{"LocalHost:3000", true},
		{"[::1]:8931", true},
		{"::1", true},
		{"0.0.0.0:8931", false},
		{"10.0.0.1", false},
		{"evil.example", false},
		{"localhost.evil.example:80", false},
		{"", false},
	} {
		if got := Host(tt.in); got != tt.want {
			t.Errorf("Host(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
