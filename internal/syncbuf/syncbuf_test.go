package syncbuf_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/taskgate/taskgate/internal/syncbuf"
)

// Concurrent writers lose nothing and interleave whole writes; the race
// detector checks the locking.
func TestConcurrentWrites(t *testing.T) {
	var b syncbuf.Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				b.Write([]byte("ab"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	got := b.String()
	if len(got) != 8*100*2 || strings.Count(got, "ab") != 800 {
		t.Fatalf("got %d bytes with %d whole writes, want 1600 and 800", len(got), strings.Count(got, "ab"))
	}
}
