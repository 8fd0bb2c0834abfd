// Package sse passes a server-sent event stream through event by event, so
// that a reader can see, rewrite or drop each event before any byte of the
// events after it is released. It holds no protocol knowledge, bounds
// what it buffers, and never blocks on anything but its source.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// Filter sees the data of each complete event (its data lines joined by
// newlines; never nil) and returns the data to send in its place; returning
// data unchanged leaves the event byte for byte as it came.
type Filter func(data []byte) []byte

// EventFilter sees each complete event's ID (its id field, empty if none)
// and data (nil for an event without data lines) and returns the data to
// send in its place, or nil to drop the event.
type EventFilter func(id string, data []byte) []byte

// NewReader passes body's events through f. An event longer than maxEvent
// bytes ends the stream with an error instead of being buffered. An event
// cut off by the end of the stream is passed on untouched and unseen: its
// reader discards it too.
func NewReader(body io.ReadCloser, maxEvent int, f Filter) io.ReadCloser {
	return &reader{src: bufio.NewReader(body), body: body, max: maxEvent, filter: f}
}

// NewEventReader is NewReader for a reader of event IDs: the events it
// passes have no id field (their reader cannot resume the stream they came
// from), and an event cut off by the end of the stream is dropped.
func NewEventReader(body io.ReadCloser, maxEvent int, f EventFilter) io.ReadCloser {
	return &reader{src: bufio.NewReader(body), body: body, max: maxEvent, events: f}
}

type reader struct {
	src     *bufio.Reader
	body    io.Closer
	max     int
	filter  Filter
	events  EventFilter
	pending []byte
	err     error
}

func (r *reader) Read(p []byte) (int, error) {
	for len(r.pending) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		r.pending, r.err = r.next()
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}

func (r *reader) Close() error { return r.body.Close() }

// Buffered is how many bytes of the event being passed on are left to
// read: none once it has been read whole.
func (r *reader) Buffered() int { return len(r.pending) }

// next reads one event, up to and including the blank line that ends it.
func (r *reader) next() ([]byte, error) {
	var (
		lines [][]byte
		data  []byte
		id    string
		size  int
		seen  bool
	)
	for {
		line, err := readLine(r.src, r.max-size)
		if errors.Is(err, errLineTooLong) {
			return nil, fmt.Errorf("a server-sent event exceeds %d bytes", r.max)
		}
		size += len(line)
		if len(line) > 0 {
			lines = append(lines, line)
		}
		trimmed := bytes.TrimRight(line, "\r\n")
		if v, ok := bytes.CutPrefix(trimmed, []byte("data:")); ok {
			if seen {
				data = append(data, '\n')
			}
			if data == nil {
				data = make([]byte, 0, len(v))
			}
			data, seen = append(data, bytes.TrimPrefix(v, []byte(" "))...), true
		}
		if v, ok := bytes.CutPrefix(trimmed, []byte("id:")); ok {
			id = string(bytes.TrimPrefix(v, []byte(" ")))
		}
		if err != nil {
			if r.events != nil {
				return nil, err
			}
			return bytes.Join(lines, nil), err
		}
		if len(trimmed) == 0 {
			if r.events != nil {
				return r.applyEvent(lines, id, data), nil
			}
			if !seen {
				return bytes.Join(lines, nil), nil
			}
			return r.apply(lines, data), nil
		}
	}
}

// apply runs the filter and rebuilds the event when it changed the data.
func (r *reader) apply(lines [][]byte, data []byte) []byte {
	out := r.filter(data)
	if out == nil {
		return nil
	}
	if bytes.Equal(out, data) {
		return bytes.Join(lines, nil)
	}
	var event []byte
	wrote := false
	for _, l := range lines {
		if bytes.HasPrefix(l, []byte("data:")) {
			if !wrote {
				// One data line per line of the new data, where the old
				// data lines stood.
				for _, d := range bytes.Split(out, []byte("\n")) {
					event = append(event, "data: "...)
					event = append(event, d...)
					event = append(event, '\n')
				}
				wrote = true
			}
			continue
		}
		event = append(event, l...)
	}
	return event
}

// applyEvent runs the event filter and rebuilds the event without its id
// field, and with the filter's data.
func (r *reader) applyEvent(lines [][]byte, id string, data []byte) []byte {
	out := r.events(id, data)
	if out == nil {
		return nil
	}
	var event []byte
	for _, l := range lines {
		if bytes.HasPrefix(l, []byte("data:")) || bytes.HasPrefix(l, []byte("id:")) || len(bytes.TrimRight(l, "\r\n")) == 0 {
			continue
		}
		event = append(event, l...)
	}
	for _, d := range bytes.Split(out, []byte("\n")) {
		event = append(event, "data: "...)
		event = append(event, d...)
		event = append(event, '\n')
	}
	return append(event, '\n')
}

// errLineTooLong is readLine's error for a line beyond its limit.
var errLineTooLong = errors.New("line too long")

// readLine reads up to and including the next newline, failing as soon as
// the line exceeds limit bytes, so that a stream without newlines cannot
// make it buffer without bound.
func readLine(r *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > limit {
			return nil, errLineTooLong
		}
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return line, err
	}
}
