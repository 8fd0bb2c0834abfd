package worker

import (
	"testing"
	"time"

	"github.com/taskgate/taskgate/ledger"
)

func TestDueForExpiry(t *testing.T) {
	at := time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		status ledger.ApprovalRequestStatus
		now    time.Time
		want   bool
	}{
		{"pending, before its expiry", ledger.RequestPending, at.Add(-time.Second), false},
		{"pending, at its expiry", ledger.RequestPending, at, true},
		{"pending, after its expiry", ledger.RequestPending, at.Add(time.Minute), true},
		{"approved just in time", ledger.RequestApproved, at.Add(time.Minute), false},
		{"declined", ledger.RequestDeclined, at.Add(time.Minute), false},
		{"expired already", ledger.RequestExpired, at.Add(time.Minute), false},
		{"cancelled", ledger.RequestCancelled, at.Add(time.Minute), false},
	}
	for _, tt := range tests {
		q := &ledger.ApprovalRequest{Status: tt.status, ExpiresAt: at}
		if got := dueForExpiry(q, tt.now); got != tt.want {
			t.Errorf("%s: dueForExpiry = %v, want %v", tt.name, got, tt.want)
		}
	}
}
