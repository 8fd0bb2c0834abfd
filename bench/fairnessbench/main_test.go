package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestRunSmoke runs the whole benchmark for a moment with a small flood:
// B's calls get tasks quiet and during A's flood, and A's calls are each
// answered with a task or a limit's refusal.
func TestRunSmoke(t *testing.T) {
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	args := []string{"-duration", "2s", "-warmup", "10ms", "-flood-calls", "400", "-flood-concurrency", "8", "-flood-within", "30s", "-json", "-dir", t.TempDir()}
	if code := run(ctx, args, &stdout, &stderr); code != 0 {
		t.Fatalf("fairnessbench %v exited %d:\n%s", args, code, stderr.String())
	}
	var rep results
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("the report is not JSON: %v\n%s", err, stdout.String())
	}
	if rep.Quiet.Calls == 0 || rep.Flood.Calls == 0 || rep.A.Calls == 0 || rep.Ratio <= 0 {
		t.Errorf("report %+v: want B's calls in both windows, A's calls and a ratio", rep)
	}
}

func TestFlagsAreChecked(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-flood-calls", "0"}, "-flood-calls must be at least 1"},
		{[]string{"-flood-concurrency", "0"}, "-flood-concurrency must be at least 1"},
		{[]string{"-duration", "10s", "-flood-within", "5s"}, "-flood-within (5s) must cover"},
		{[]string{"-b-interval", "-1ms"}, "-b-interval must not be negative"},
		{[]string{"stray"}, "unexpected arguments"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), tt.args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("fairnessbench %v exited %d with %q, want 2 and %q", tt.args, code, stderr.String(), tt.want)
		}
	}
}
