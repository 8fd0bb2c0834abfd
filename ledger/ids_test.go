package ledger

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestOrderedIDSortsByCreationTime(t *testing.T) {
	base := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	steps := []time.Duration{0, time.Millisecond, 31 * time.Millisecond, 32 * time.Millisecond, time.Second, 24 * time.Hour, 10 * 365 * 24 * time.Hour}
	prevMax := ""
	for _, d := range steps {
		// Random bytes may not reorder IDs made in different milliseconds.
		ids := make([]string, 50)
		for i := range ids {
			ids[i] = orderedID(base.Add(d), 20)
			if len(ids[i]) != 42 {
				t.Fatalf("ID %s has %d characters, want 42 (48 time bits and 160 random bits)", ids[i], len(ids[i]))
			}
		}
		if lo := slices.Min(ids); lo <= prevMax {
			t.Fatalf("an ID made at +%s sorts before one made earlier: %s <= %s", d, lo, prevMax)
		}
		prevMax = slices.Max(ids)
	}
}

func TestNewIDsAreDistinct(t *testing.T) {
	seen := map[string]bool{}
	for range 10000 {
		for _, id := range []string{NewTaskID(), NewRequestID()} {
			if seen[id] || !(strings.HasPrefix(id, "task-") || strings.HasPrefix(id, "req-")) {
				t.Fatalf("ID %q repeats or lacks its prefix", id)
			}
			seen[id] = true
		}
	}
}
