package storetest

import (
	"context"
	"testing"
	"time"
)

// testConsoleSessionEnds checks the record of console sessions ended
// before their time: an ended session reads as ended, another does not,
// ending one twice is harmless, and a record is pruned once the time its
// session would have ended has passed.
func testConsoleSessionEnds(t *testing.T, newStore Factory) {
	ctx := context.Background()
	s := newStore(t)
	t0 := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	ended := func(id string) bool {
		t.Helper()
		got, err := s.ConsoleSessionEnded(ctx, id)
		if err != nil {
			t.Fatalf("ConsoleSessionEnded(%s): %v", id, err)
		}
		return got
	}
	if ended("sess-a") {
		t.Fatal("a session never ended reads as ended")
	}
	if err := s.ConsoleSessionEnd(ctx, "sess-a", t0.Add(time.Hour), t0); err != nil {
		t.Fatal(err)
	}
	if err := s.ConsoleSessionEnd(ctx, "sess-a", t0.Add(time.Hour), t0.Add(time.Minute)); err != nil {
		t.Fatalf("ending a session twice: %v", err)
	}
	if !ended("sess-a") || ended("sess-b") {
		t.Fatalf("after ending sess-a: sess-a ended %v, sess-b ended %v; want true, false", ended("sess-a"), ended("sess-b"))
	}
	if err := s.ConsoleSessionEnd(ctx, "", t0.Add(time.Hour), t0); err == nil {
		t.Error("a session without an ID was recorded as ended")
	}
	// Two hours on, sess-a's cookie has expired by itself: its record goes
	// as the next one is written.
	if err := s.ConsoleSessionEnd(ctx, "sess-b", t0.Add(3*time.Hour), t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if ended("sess-a") || !ended("sess-b") {
		t.Errorf("two hours on: sess-a ended %v (its record past its time), sess-b ended %v; want false, true", ended("sess-a"), ended("sess-b"))
	}
}
