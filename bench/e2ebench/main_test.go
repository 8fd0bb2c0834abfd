package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestRunSmoke runs the whole benchmark on a few operations: every one
// completes with one provider job, and each figure is measured.
func TestRunSmoke(t *testing.T) {
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	args := []string{"-ops", "60", "-clients", "4", "-job", "10ms", "-within", "2m", "-json", "-dir", t.TempDir()}
	if code := run(ctx, args, &stdout, &stderr); code != 0 {
		t.Fatalf("e2ebench %v exited %d:\n%s", args, code, stderr.String())
	}
	var rep results
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("the report is not JSON: %v\n%s", err, stdout.String())
	}
	if rep.Ops != 60 || rep.Jobs != 60 || rep.PerSecond <= 0 || rep.GatewayCPUMs <= 0 || rep.Commits < 1 || !rep.Receipts || rep.Issued != 60 {
		t.Errorf("report %+v: want 60 operations, jobs and receipts issued, a rate, the gateway's CPU and at least one commit per operation", rep)
	}
}

func TestFlagsAreChecked(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-ops", "0"}, "-ops must be at least 1"},
		{[]string{"-clients", "0"}, "-clients must be at least 1"},
		{[]string{"-job", "-1ms"}, "-job must not be negative"},
		{[]string{"-within", "0s"}, "-within must be positive"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), tt.args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("e2ebench %v: exit %d, stderr %q; want 2 and %q", tt.args, code, stderr.String(), tt.want)
		}
	}
}
