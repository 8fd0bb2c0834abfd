package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"
)

// TestRunSmoke runs every measurement for a moment: each one commits real
// rows on a fresh ledger and checks them, so a change to what an
// acceptance must write that the raw baseline does not follow fails here.
func TestRunSmoke(t *testing.T) {
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"-duration", "100ms", "-warmup", "10ms", "-concurrency", "4", "-json", "-dir", t.TempDir()}
	if code := run(ctx, args, &stdout, &stderr); code != 0 {
		t.Fatalf("acceptbench %v exited %d:\n%s", args, code, stderr.String())
	}
	var rep map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("the report is not JSON: %v\n%s", err, stdout.String())
	}
}
