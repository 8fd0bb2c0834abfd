package worker

import "testing"

// TestRunningStatus: the provider's words replace a running operation's
// status, except the reason a kept cancel did not stop it, which stays
// in front of them.
func TestRunningStatus(t *testing.T) {
	kept := KeptCancelStatus
	for _, tt := range []struct {
		name, current, provider, want string
	}{
		{"provider says nothing", "running at hosted_test", "", "running at hosted_test"},
		{"provider's words replace the gateway's", "running at hosted_test", "40% done", "40% done"},
		{"provider's words replace its earlier ones", "40% done", "80% done", "80% done"},
		{"kept cancel, provider says nothing", kept, "", kept},
		{"kept cancel stays in front", kept, "40% done", kept + "; the provider says: 40% done"},
		{"kept cancel stays as the provider goes on", kept + "; the provider says: 40% done", "80% done", kept + "; the provider says: 80% done"},
		{"the same words change nothing", kept + "; the provider says: 40% done", "40% done", kept + "; the provider says: 40% done"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := runningStatus(tt.current, tt.provider); got != tt.want {
				t.Errorf("runningStatus(%q, %q) = %q, want %q", tt.current, tt.provider, got, tt.want)
			}
		})
	}
}
