package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// TestEventHash pins what a link covers: each case's hash is the SHA-256
// of the canonical JSON written out by hand, so that any change to the
// content, its keys or its formatting fails here before it breaks the
// chains of existing ledgers.
func TestEventHash(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
	prev := sum("the event before")
	data := `{"send":1,"worker":"w-1"}`
	base := Event{ID: 41, OperationRef: 3, AttemptRef: 7, Kind: EventSendStarted, Data: json.RawMessage(data), CreatedAt: at, PrevHash: prev}
	content := func(attempt, createdAt, data, kind, operation, prev string) string {
		return `{"attempt":` + attempt + `,"created_at":"` + createdAt + `","data_sha256":"` + sum(data) +
			`","kind":"` + kind + `","operation":` + operation + `,"prev":"` + prev + `"}`
	}
	want := sum(content("7", "2026-01-02T03:04:05.123456Z", data, "send_started", "3", prev))
	tests := []struct {
		name string
		edit func(e *Event)
		want string
	}{
		{"an event", func(*Event) {}, want},
		{"the row ID is not covered", func(e *Event) { e.ID = 99 }, want},
		{"the time in another zone", func(e *Event) { e.CreatedAt = at.In(time.FixedZone("CET", 3600)) }, want},
		{"nanoseconds below the stored microsecond", func(e *Event) { e.CreatedAt = at.Add(999) }, want},
		{"the first event of a chain", func(e *Event) { e.PrevHash = "" },
			sum(content("7", "2026-01-02T03:04:05.123456Z", data, "send_started", "3", ""))},
		{"the first event after the migration", func(e *Event) { e.PrevHash = ChainStartMigration },
			sum(content("7", "2026-01-02T03:04:05.123456Z", data, "send_started", "3", "migration-00010"))},
		{"no attempt", func(e *Event) { e.AttemptRef = 0 },
			sum(content("0", "2026-01-02T03:04:05.123456Z", data, "send_started", "3", prev))},
		{"another operation", func(e *Event) { e.OperationRef = 4 },
			sum(content("7", "2026-01-02T03:04:05.123456Z", data, "send_started", "4", prev))},
		{"another kind", func(e *Event) { e.Kind = EventFailed },
			sum(content("7", "2026-01-02T03:04:05.123456Z", data, "failed", "3", prev))},
		{"another microsecond", func(e *Event) { e.CreatedAt = at.Add(time.Microsecond) },
			sum(content("7", "2026-01-02T03:04:05.123457Z", data, "send_started", "3", prev))},
		{"the data spelled otherwise", func(e *Event) { e.Data = json.RawMessage(`{"worker":"w-1","send":1}`) },
			sum(content("7", "2026-01-02T03:04:05.123456Z", `{"worker":"w-1","send":1}`, "send_started", "3", prev))},
		{"data with an integer a double cannot hold", func(e *Event) { e.Data = json.RawMessage(`{"maximum":9007199254740993}`) },
			sum(content("7", "2026-01-02T03:04:05.123456Z", `{"maximum":9007199254740993}`, "send_started", "3", prev))},
		{"no data", func(e *Event) { e.Data = nil },
			sum(content("7", "2026-01-02T03:04:05.123456Z", "", "send_started", "3", prev))},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := base
			tt.edit(&e)
			got, err := EventHash(&e)
			if err != nil {
				t.Fatalf("EventHash: %v", err)
			}
			if got != tt.want {
				t.Errorf("EventHash = %s, want %s", got, tt.want)
			}
		})
		if other, ok := seen[tt.want]; ok && tt.want != want {
			t.Errorf("cases %q and %q expect one hash: the table does not tell them apart", other, tt.name)
		}
		seen[tt.want] = tt.name
	}
}

// chainOf builds a chain of n events written the way the stores write
// them, for operation 5 of acme.
func chainOf(t *testing.T, n int, start string) *Chain {
	t.Helper()
	c := &Chain{OperationRef: 5, Tenant: "acme", OperationID: "op-1", Head: start}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range n {
		e := &Event{ID: int64(10 + i), OperationRef: 5, AttemptRef: 2, Kind: EventLookup,
			Data: json.RawMessage(`{"answer":"accepted","detail":"` + strings.Repeat("x", i) + `"}`), CreatedAt: at.Add(time.Duration(i) * time.Second), PrevHash: c.Head}
		h, err := EventHash(e)
		if err != nil {
			t.Fatal(err)
		}
		e.Hash, c.Head = h, h
		c.Events = append(c.Events, e)
	}
	return c
}

// legacy is an event recorded before migration 00010: no hash.
func legacy(id int64) *Event {
	return &Event{ID: id, OperationRef: 5, Kind: EventSendStarted, Data: json.RawMessage(`{"send":1,"worker":"w"}`), CreatedAt: time.Unix(1, 0)}
}

func TestChainCheck(t *testing.T) {
	tests := []struct {
		name string
		// chain builds the chain to check, from an intact one of four
		// events unless it says otherwise.
		chain func(t *testing.T) *Chain
		// problem and event name the break (event by row ID, 0 for none);
		// problem "" means the chain holds.
		problem       ChainProblem
		event         int64
		fromMigration bool
		chained       int
		unchained     int
	}{
		{name: "intact", chain: func(t *testing.T) *Chain { return chainOf(t, 4, "") }, chained: 4},
		{name: "no events", chain: func(t *testing.T) *Chain { return chainOf(t, 0, "") }},
		{name: "migrated without events since", chain: func(t *testing.T) *Chain {
			c := chainOf(t, 0, ChainStartMigration)
			c.Events = []*Event{legacy(1), legacy(2)}
			return c
		}, fromMigration: true, unchained: 2},
		{name: "migrated, chained since", chain: func(t *testing.T) *Chain {
			c := chainOf(t, 3, ChainStartMigration)
			c.Events = append([]*Event{legacy(1), legacy(2)}, c.Events...)
			return c
		}, fromMigration: true, chained: 3, unchained: 2},
		{name: "data edited", chain: func(t *testing.T) *Chain {
			c := chainOf(t, 4, "")
			c.Events[1].Data = json.RawMessage(`{"answer":"not_found","detail":"x"}`)
			return c
		}, problem: ChainEdited, event: 11, chained: 4},
		{name: "kind edited", chain: func(t *testing.T) *Chain {
			c := chainOf(t, 4, "")
			c.Events[2].Kind = EventResultStored
			return c
		}, problem: ChainEdited, event: 12, chained: 4},
		{name: "time edited", chain: func(t *testing.T) *Chain {
			c := chainOf(t, 4, "")
			c.Events[0].CreatedAt = c.Events[0].CreatedAt.Add(time.Microsecond)
			return c
		}, problem: ChainEdited, event: 10, chained: 4},
		{name: "a middle event deleted", chain: func(t *testing.T) *Chain {
			c := chainOf(t, 4, "")
			c.Events = append(c.Events[:1], c.Events[2:]...)
			return c
		}, problem: ChainMissing, event: 12, chained: 3},
		{name: "the first event deleted", chain: func(t *testing.T) *Chain {
			c := chainOf(t, 4, "")
			c.Events = c.Events[1:]
			return c
		}, problem: ChainMissing, event: 11, chained: 3},
		{name: "the first event after the migration deleted", chain: func(t *testing.T) *Chain {
			c := chainOf(t, 3, ChainStartMigration)
			c.Events = append([]*Event{legacy(1)}, c.Events[1:]...)
			return c
		}, problem: ChainMissing, event: 11, chained: 2, unchained: 1},
		{name: "the last event deleted", chain: func(t *testing.T) *Chain {
			c := chainOf(t, 4, "")
			c.Events = c.Events[:3]
			return c
		}, problem: ChainMissing, event: 12, chained: 3},
		{name: "every event deleted", chain: func(t *testing.T) *Chain {
			c := chainOf(t, 4, "")
			c.Events = nil
			return c
		}, problem: ChainMissing},
		{name: "two neighbours swapped", chain: func(t *testing.T) *Chain {
			c := chainOf(t, 4, "")
			swapIDs(c, 1, 2)
			return c
		}, problem: ChainReordered, event: 11, chained: 4},
		{name: "the last two swapped", chain: func(t *testing.T) *Chain {
			c := chainOf(t, 4, "")
			swapIDs(c, 2, 3)
			return c
		}, problem: ChainReordered, event: 12, chained: 4},
		{name: "the first and the last swapped", chain: func(t *testing.T) *Chain {
			c := chainOf(t, 4, "")
			swapIDs(c, 0, 3)
			return c
		}, problem: ChainReordered, event: 10, chained: 4},
		{name: "an event added that branches off the chain", chain: func(t *testing.T) *Chain {
			c := chainOf(t, 4, "")
			forged := *c.Events[1]
			forged.ID, forged.Data = 99, json.RawMessage(`{}`)
			forged.Hash, _ = EventHash(&forged)
			c.Events = append(c.Events[:2], append([]*Event{&forged}, c.Events[2:]...)...)
			return c
		}, problem: ChainAdded, event: 99, chained: 5},
		{name: "an event added that the chain leads past", chain: func(t *testing.T) *Chain {
			c := chainOf(t, 4, "")
			forged := *c.Events[1]
			forged.ID, forged.Data = 99, json.RawMessage(`{}`)
			forged.Hash, _ = EventHash(&forged)
			c.Events = append(c.Events[:1], append([]*Event{&forged}, c.Events[1:]...)...)
			return c
		}, problem: ChainAdded, event: 99, chained: 5},
		{name: "an event added after the head", chain: func(t *testing.T) *Chain {
			c := chainOf(t, 4, "")
			forged := &Event{ID: 99, OperationRef: 5, Kind: EventFailed, Data: json.RawMessage(`{}`), CreatedAt: time.Unix(9, 0), PrevHash: c.Head}
			forged.Hash, _ = EventHash(forged)
			c.Events = append(c.Events, forged)
			return c
		}, problem: ChainAdded, event: 99, chained: 5},
		{name: "an event without a hash inside the chain", chain: func(t *testing.T) *Chain {
			c := chainOf(t, 4, "")
			c.Events[2].Hash = ""
			return c
		}, problem: ChainUnchained, event: 12, chained: 4},
		{name: "events without a hash before a chain begun at creation", chain: func(t *testing.T) *Chain {
			c := chainOf(t, 2, "")
			c.Events = append([]*Event{legacy(1)}, c.Events...)
			return c
		}, problem: ChainUnchained, event: 1, chained: 2, unchained: 1},
		{name: "the head reset", chain: func(t *testing.T) *Chain {
			c := chainOf(t, 4, "")
			c.Head = ""
			return c
		}, problem: ChainHeadReset, event: 13, chained: 4},
		{name: "the head set to the migration", chain: func(t *testing.T) *Chain {
			c := chainOf(t, 4, "")
			c.Head = ChainStartMigration
			return c
		}, problem: ChainHeadReset, event: 13, chained: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.chain(t).Check()
			if got.Chained != tt.chained || got.Unchained != tt.unchained || got.FromMigration != tt.fromMigration {
				t.Errorf("Check counted %d chained and %d unchained events, from migration %v; want %d, %d, %v",
					got.Chained, got.Unchained, got.FromMigration, tt.chained, tt.unchained, tt.fromMigration)
			}
			if tt.problem == "" {
				if got.Break != nil {
					t.Fatalf("Check found %s at %+v (%s); want the chain to hold", got.Break.Problem, got.Break.Event, got.Break.Detail)
				}
				return
			}
			if got.Break == nil {
				t.Fatalf("Check found the chain intact; want %s at event %d", tt.problem, tt.event)
			}
			var id int64
			if got.Break.Event != nil {
				id = got.Break.Event.ID
			}
			if got.Break.Problem != tt.problem || id != tt.event || got.Break.Detail == "" {
				t.Errorf("Check found %s at event %d (%q); want %s at event %d", got.Break.Problem, id, got.Break.Detail, tt.problem, tt.event)
			}
		})
	}
}

// swapIDs makes events i and j change places, as swapping their row IDs
// in the database does: the events read back in the other order.
func swapIDs(c *Chain, i, j int) {
	c.Events[i].ID, c.Events[j].ID = c.Events[j].ID, c.Events[i].ID
	c.Events[i], c.Events[j] = c.Events[j], c.Events[i]
}
