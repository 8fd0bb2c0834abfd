package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/taskgate/taskgate/canon"
)

// ChainStartMigration is where the chain of an operation accepted before
// the ledger kept chains begins: migration 00010 set it as the head of
// every operation it found, and the first event written after it names it
// as the link it follows. The events such an operation recorded before the
// migration carry no hash and are outside its chain. It is not a hex
// digest, so no event's hash can equal it.
const ChainStartMigration = "migration-00010"

// eventContent is what [EventHash] covers, in the stored format of every
// chain: never rename a key, or every chain breaks.
type eventContent struct {
	Attempt    int64  `json:"attempt"`
	CreatedAt  string `json:"created_at"`
	DataSHA256 string `json:"data_sha256"`
	Kind       string `json:"kind"`
	Operation  int64  `json:"operation"`
	Prev       string `json:"prev"`
}

// chainTime is how an event's time enters its hash: UTC, to the
// microsecond that both stores keep.
const chainTime = "2006-01-02T15:04:05.000000Z"

// EventHash returns the link of e in its operation's hash chain: the
// lowercase hex SHA-256 of the RFC 8785 canonical JSON (package canon) of
//
//	{"attempt": e.AttemptRef, "created_at": e.CreatedAt, "data_sha256": …,
//	 "kind": e.Kind, "operation": e.OperationRef, "prev": e.PrevHash}
//
// with created_at in RFC 3339, UTC, to the microsecond, an unset
// reference as 0, and data_sha256 the lowercase hex SHA-256 of e.Data as
// stored. The data enters by its digest: the ledger keeps it as text and
// reads it back byte for byte, so the digest is exact, and the canonical
// content stays small however large the data is and holds none of its
// numbers (canon refuses integers beyond ±2^53, which an upstream's
// question may contain). The event's row ID is not covered: the links
// carry the order, so a reordered chain shows as links that point the
// wrong way, not as edited events.
//
// It is pure and is the one definition of a link: the stores compute it
// when they append an event, and [Chain.Check] when it verifies one.
func EventHash(e *Event) (string, error) {
	data := sha256.Sum256(e.Data)
	raw, err := json.Marshal(eventContent{
		Attempt:    e.AttemptRef,
		CreatedAt:  e.CreatedAt.UTC().Format(chainTime),
		DataSHA256: hex.EncodeToString(data[:]),
		Kind:       string(e.Kind),
		Operation:  e.OperationRef,
		Prev:       e.PrevHash,
	})
	if err != nil {
		return "", fmt.Errorf("encode the content of %s event %d: %w", e.Kind, e.ID, err)
	}
	c, err := canon.Canonicalize(raw)
	if err != nil {
		return "", fmt.Errorf("canonicalise the content of %s event %d: %w", e.Kind, e.ID, err)
	}
	h := sha256.Sum256(c)
	return hex.EncodeToString(h[:]), nil
}

// Chain is one operation's hash chain as a single read of the ledger saw
// it: the operation, the head its row holds, and its events in the order
// they were written (by row ID). It holds what is stored, never a value
// recomputed from it.
type Chain struct {
	OperationRef int64
	Tenant       string
	OperationID  string
	Head         string
	Events       []*Event
}

// ChainProblem says how a chain fails to hold. Its values are stable
// strings, printed by taskgate verify.
type ChainProblem string

const (
	// ChainEdited: an event's content (kind, data, time, attempt or the
	// link it names) no longer hashes to the hash stored with it.
	ChainEdited ChainProblem = "edited"
	// ChainMissing: an event names a link that no event of the operation
	// has, or the head does: an event was deleted.
	ChainMissing ChainProblem = "missing"
	// ChainReordered: an event follows one that is stored after it: events
	// changed places.
	ChainReordered ChainProblem = "reordered"
	// ChainAdded: an event stands where the chain does not lead through
	// it: the event after it links past it, or the head stops before it.
	ChainAdded ChainProblem = "added"
	// ChainUnchained: an event without a hash where the chain needs one.
	ChainUnchained ChainProblem = "unchained"
	// ChainHeadReset: the operation's head says its chain is empty while
	// chained events exist.
	ChainHeadReset ChainProblem = "head_reset"
)

// ChainBreak is the first place, in the order events were written, where
// a chain does not hold.
type ChainBreak struct {
	Problem ChainProblem
	// Event is the first event that does not match. For a break at the
	// head (the latest events deleted, or the head reset) it is the
	// operation's last event, nil when it has none.
	Event *Event
	// Detail says what was found and what it means, as a sentence.
	Detail string
}

// ChainCheck is what [Chain.Check] found.
type ChainCheck struct {
	// Chained counts the events the chain links; Unchained those recorded
	// before the chain began at migration 00010.
	Chained   int
	Unchained int
	// FromMigration says that the chain begins at [ChainStartMigration]
	// rather than with the operation's first event.
	FromMigration bool
	// Break is where the chain does not hold; nil when it holds.
	Break *ChainBreak
}

// Check verifies c: that every chained event hashes to its stored hash,
// that each links to the event written before it (the first to "" or
// [ChainStartMigration]), and that the head is the last event's hash. It
// reports the first event, in the order they were written, that does not
// match. Only the events from before migration 00010 may lack a hash, and
// only before every chained one.
func (c *Chain) Check() ChainCheck {
	var res ChainCheck
	for _, e := range c.Events {
		if e.Hash != "" {
			break
		}
		res.Unchained++
	}
	chained := c.Events[res.Unchained:]
	res.Chained = len(chained)
	w := newWalk(c, chained)
	start := c.Head
	if len(chained) > 0 {
		start = chained[0].PrevHash
	}
	res.FromMigration = start == ChainStartMigration
	// Events without a hash before a chain that claims to begin with the
	// operation's creation were not written by the ledger (a chain that
	// begins at a hash lost its start, which the links report).
	if res.Unchained > 0 && start == "" {
		res.Break = &ChainBreak{Problem: ChainUnchained, Event: c.Events[0],
			Detail: "it has no hash, yet the operation's chain begins with its creation rather than at migration 00010: the row was added outside the ledger, or its hash erased"}
		return res
	}
	for i := range chained {
		if b := w.link(i); b != nil {
			res.Break = b
			return res
		}
	}
	res.Break = w.head()
	return res
}

// walk is one check of a chain: its chained events, where each hash
// stands, and which hashes something links to (an event, or the head), so
// that a link other than the one before can be told apart: to a later
// event, past an event that does not belong, or to none at all.
type walk struct {
	c       *Chain
	chained []*Event
	at      map[string]int
	linked  map[string]bool
}

func newWalk(c *Chain, chained []*Event) *walk {
	w := &walk{c: c, chained: chained, at: make(map[string]int, len(chained)), linked: make(map[string]bool, len(chained)+1)}
	for i, e := range chained {
		if e.Hash != "" {
			w.at[e.Hash] = i
		}
		w.linked[e.PrevHash] = true
	}
	w.linked[c.Head] = true
	return w
}

// link checks the i'th chained event: its hash, then the link it names.
func (w *walk) link(i int) *ChainBreak {
	e := w.chained[i]
	if e.Hash == "" {
		return &ChainBreak{Problem: ChainUnchained, Event: e,
			Detail: "it has no hash, though events before it are chained: the row was added outside the ledger, or its hash erased"}
	}
	if h, err := EventHash(e); err != nil || h != e.Hash {
		return &ChainBreak{Problem: ChainEdited, Event: e,
			Detail: "its content no longer matches its hash: the row was edited"}
	}
	if i == 0 {
		if e.PrevHash == "" || e.PrevHash == ChainStartMigration {
			return nil
		}
	} else if e.PrevHash == w.chained[i-1].Hash {
		return nil
	}
	j, found := w.at[e.PrevHash]
	switch {
	case found && j >= i:
		return &ChainBreak{Problem: ChainReordered, Event: e,
			Detail: fmt.Sprintf("it follows event %d, which is stored after it: the events were reordered", w.chained[j].ID)}
	case found && w.linked[w.chained[i-1].Hash]:
		// The chain goes on from the event before: this one branches
		// off it.
		return &ChainBreak{Problem: ChainAdded, Event: e,
			Detail: fmt.Sprintf("it links back to event %d, while the chain goes on from event %d: the row was added outside the ledger", w.chained[j].ID, w.chained[i-1].ID)}
	case found:
		// The link leads past the events between: they are not part of
		// the chain.
		return &ChainBreak{Problem: ChainAdded, Event: w.chained[j+1],
			Detail: fmt.Sprintf("the chain leads past it, from event %d to event %d: the row was added outside the ledger", w.chained[j].ID, e.ID)}
	case i == 0:
		return &ChainBreak{Problem: ChainMissing, Event: e,
			Detail: "the event it follows is not in the ledger: the operation's earlier events were deleted"}
	default:
		return &ChainBreak{Problem: ChainMissing, Event: e,
			Detail: fmt.Sprintf("the event it follows is not in the ledger: an event between event %d and it was deleted", w.chained[i-1].ID)}
	}
}

// head checks that the chain's head is the hash of its last chained
// event, or marks an empty chain.
func (w *walk) head() *ChainBreak {
	c, chained := w.c, w.chained
	if len(chained) == 0 {
		if c.Head == "" || c.Head == ChainStartMigration {
			return nil
		}
		return &ChainBreak{Problem: ChainMissing, Event: last(c.Events),
			Detail: "the operation's head names an event, but it has no chained events: they were deleted"}
	}
	end := chained[len(chained)-1]
	if c.Head == end.Hash {
		return nil
	}
	if j, found := w.at[c.Head]; found {
		return &ChainBreak{Problem: ChainAdded, Event: chained[j+1],
			Detail: fmt.Sprintf("the operation's head is event %d, which it follows: the row was added outside the ledger, or the head set back", chained[j].ID)}
	}
	if c.Head == "" || c.Head == ChainStartMigration {
		return &ChainBreak{Problem: ChainHeadReset, Event: end,
			Detail: "the operation's head says its chain is empty, yet it has chained events: the operation's row was edited"}
	}
	return &ChainBreak{Problem: ChainMissing, Event: end,
		Detail: "the operation's head names an event after this one that is not in the ledger: its latest events were deleted"}
}

func last(events []*Event) *Event {
	if len(events) == 0 {
		return nil
	}
	return events[len(events)-1]
}
