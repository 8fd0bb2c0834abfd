package console

import "testing"

// A sign-in returns only to an approval request's own page, named exactly
// as the console names it; any other path, however built, goes to the
// inbox.
func TestReturnTo(t *testing.T) {
	for _, tt := range []struct{ path, want string }{
		{"/console/requests/7", "/console/requests/7"},
		{"/console/requests/7/approve", ""},
		{"/console/requests/../operations/x", ""},
		{"/console/requests/07", ""},
		{"/console/requests/-1", ""},
		{"/console/requests/", ""},
		{"//evil.example/console/requests/7", ""},
		{"https://evil.example/console/requests/7", ""},
		{"/console/inbox", ""},
		{"", ""},
	} {
		if got := returnTo(tt.path); got != tt.want {
			t.Errorf("returnTo(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
}
