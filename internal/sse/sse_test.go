package sse

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

func TestPassesEventsThrough(t *testing.T) {
	src := "event: message\r\nid: 1\ndata: {\"a\":1}\n\n: comment\n\ndata: line1\ndata: line2\n\ndata: cut"
	var seen []string
	r := NewReader(io.NopCloser(strings.NewReader(src)), 1<<10, func(d []byte) []byte {
		seen = append(seen, string(d))
		return d
	})
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != src {
		t.Fatalf("stream changed:\n%q\nwant\n%q", out, src)
	}
	if want := []string{`{"a":1}`, "line1\nline2"}; strings.Join(seen, "|") != strings.Join(want, "|") {
		t.Fatalf("filter saw %q, want %q (the cut-off event unseen)", seen, want)
	}
}

func TestRewritesData(t *testing.T) {
	src := "id: 7\ndata: a\ndata: b\n\n"
	r := NewReader(io.NopCloser(strings.NewReader(src)), 1<<10, func(d []byte) []byte {
		return bytes.ToUpper(d)
	})
	out, _ := io.ReadAll(r)
	if string(out) != "id: 7\ndata: A\ndata: B\n\n" {
		t.Fatalf("rewritten = %q", out)
	}
}

func TestBoundsAnEvent(t *testing.T) {
	src := "data: " + strings.Repeat("x", 100) // no newline: an unbounded line
	r := NewReader(io.NopCloser(strings.NewReader(src)), 64, func(d []byte) []byte { return d })
	if _, err := io.ReadAll(r); err == nil || !strings.Contains(err.Error(), "exceeds 64 bytes") {
		t.Fatalf("err = %v, want the size limit", err)
	}
}

func TestDropsEvents(t *testing.T) {
	src := "data: keep1\n\nevent: message\ndata: drop\n\ndata: keep2\n\n"
	r := NewReader(io.NopCloser(strings.NewReader(src)), 1<<10, func(d []byte) []byte {
		if string(d) == "drop" {
			return nil
		}
		return d
	})
	out, _ := io.ReadAll(r)
	if string(out) != "data: keep1\n\ndata: keep2\n\n" {
		t.Fatalf("with one event dropped = %q", out)
	}
}

func TestKeepsEmptyData(t *testing.T) {
	// go-sdk sends an event with empty data to carry the first event ID.
	src := "id: 0_0\ndata: \n\ndata: {}\n\n"
	r := NewReader(io.NopCloser(strings.NewReader(src)), 1<<10, func(d []byte) []byte { return d })
	out, _ := io.ReadAll(r)
	if string(out) != src {
		t.Fatalf("stream changed:\n%q\nwant\n%q", out, src)
	}
}

func TestEventReader(t *testing.T) {
	src := "event: message\nid: 1\ndata: keep\n\nid: 2\ndata: \n\nretry: 100\n\nid: 3\ndata: drop\n\ndata: no-id\n\nid: 4\ndata: cut"
	var ids []string
	r := NewEventReader(io.NopCloser(strings.NewReader(src)), 1<<10, func(id string, d []byte) []byte {
		ids = append(ids, id)
		if len(d) == 0 || string(d) == "drop" {
			return nil
		}
		return bytes.ToUpper(d)
	})
	out, _ := io.ReadAll(r)
	if want := "event: message\ndata: KEEP\n\ndata: NO-ID\n\n"; string(out) != want {
		t.Fatalf("events = %q, want %q", out, want)
	}
	if want := []string{"1", "2", "", "3", ""}; strings.Join(ids, ",") != strings.Join(want, ",") {
		t.Fatalf("filter saw IDs %q, want %q", ids, want)
	}
}
