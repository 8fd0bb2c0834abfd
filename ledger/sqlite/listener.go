package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"time"

	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riversqlite"
)

// jobDriver is River's SQLite driver for the job client, with its
// listener replaced by one that reads River's notifications when this
// ledger has committed something rather than on a fixed beat.
type jobDriver struct {
	*riversqlite.Driver
	read    *sql.DB
	commits *commitSignal
}

func (d jobDriver) GetListener(p *riverdriver.GetListenenerParams) riverdriver.Listener {
	table := "river_notification"
	if p.Schema != "" {
		table = p.Schema + "." + table
	}
	return &listener{db: d.read, commits: d.commits, schema: p.Schema, table: table, minGap: listenerMinGap, idleEvery: listenerIdleEvery}
}

const (
	// listenerMinGap is the least time between two reads of the
	// notifications table: River's own listener reads it this often.
	listenerMinGap = 50 * time.Millisecond
	// listenerIdleEvery is how often the table is read when nothing was
	// committed through this ledger: what another process on the same
	// file wrote (taskgate's commands) is seen within it. It is the
	// default fetch poll, which finds such a process's jobs as soon.
	listenerIdleEvery = time.Second
	// listenerBatch is how many notifications one read takes at most.
	listenerBatch = 256
)

// listener delivers River's notifications on SQLite. River keeps them as
// rows of its river_notification table, written in the transaction that
// inserted a job, and its own listener reads the table every 50ms whether
// or not anything was written: on an idle gateway that was the largest
// part of its CPU. This listener reads the table after a transaction on
// this ledger's write connection commits (at most every minGap), and
// otherwise every idleEvery. It reads on the read pool, so it never waits
// for the one write connection, and it delivers what River's listener
// would: every row of a subscribed topic written after the topic was
// subscribed, in ID order. IDs are a safe cursor because SQLite has one
// writer at a time: a row with a lower ID cannot commit after a higher one.
type listener struct {
	db                *sql.DB
	commits           *commitSignal
	schema, table     string
	minGap, idleEvery time.Duration

	mu        sync.Mutex
	connected bool
	woken     <-chan struct{}
	committed bool // a commit signal was taken and no read has succeeded since
	stop      func()
	lastID    int64
	lastRead  time.Time
	topics    map[string]int64 // the last ID before each topic was subscribed
	pending   []notification
}

type notification struct {
	id             int64
	topic, payload string
}

func (l *listener) Connect(ctx context.Context) error {
	last, err := l.lastRowID(ctx)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.connected {
		return errors.New("listener is already connected")
	}
	l.connected, l.lastID, l.topics, l.pending = true, last, map[string]int64{}, nil
	l.woken, l.stop = l.commits.subscribe()
	return nil
}

func (l *listener) Close(context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.connected {
		l.stop()
	}
	l.connected, l.topics, l.pending = false, nil, nil
	return nil
}

func (l *listener) Listen(ctx context.Context, topic string) error {
	last, err := l.lastRowID(ctx)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.connected {
		return errors.New("listener is not connected")
	}
	if _, ok := l.topics[topic]; !ok {
		l.topics[topic] = max(l.lastID, last)
	}
	return nil
}

func (l *listener) Unlisten(_ context.Context, topic string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.connected {
		return errors.New("listener is not connected")
	}
	delete(l.topics, topic)
	return nil
}

func (l *listener) Ping(ctx context.Context) error { return l.db.PingContext(ctx) }

func (l *listener) Schema() string { return l.schema }

// SetAfterConnectExec is for River's own driver tests; taskgate never
// calls it.
func (l *listener) SetAfterConnectExec(string) {}

func (l *listener) WaitForNotification(ctx context.Context) (*riverdriver.Notification, error) {
	for {
		if n, err := l.deliver(); n != nil || err != nil {
			return n, err
		}
		if err := l.wait(ctx); err != nil {
			return nil, err
		}
		if err := l.read(ctx); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
	}
}

// deliver returns the next pending notification of a subscribed topic.
func (l *listener) deliver() (*riverdriver.Notification, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.connected {
		return nil, errors.New("listener is not connected")
	}
	for len(l.pending) > 0 {
		n := l.pending[0]
		l.pending = l.pending[1:]
		// Subscriptions can change between a read and its delivery.
		if from, ok := l.topics[n.topic]; ok && n.id > from {
			return &riverdriver.Notification{Topic: n.topic, Payload: n.payload}, nil
		}
	}
	return nil, nil
}

// wait returns when the table is next worth reading (see readAt). A
// commit signal it takes is kept in l.committed until a read has
// succeeded, so that a wait or a read cut short (River interrupts its
// listener's wait every few seconds) does not lose it.
func (l *listener) wait(ctx context.Context) error {
	l.mu.Lock()
	woken, lastRead, committed := l.woken, l.lastRead, l.committed
	l.mu.Unlock()
	if !committed {
		idle := time.NewTimer(time.Until(readAt(lastRead, false, l.minGap, l.idleEvery)))
		defer idle.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-idle.C:
			return nil
		case <-woken:
			l.mu.Lock()
			l.committed = true
			l.mu.Unlock()
		}
	}
	t := time.NewTimer(time.Until(readAt(lastRead, true, l.minGap, l.idleEvery)))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	return nil
}

// readAt is when a listener that last read the table at lastRead reads it
// next: minGap after that read once a commit was signalled, else
// idleEvery after it. However many commits are signalled, and whoever
// makes them, the table is read at most once per minGap.
func readAt(lastRead time.Time, committed bool, minGap, idleEvery time.Duration) time.Time {
	if committed {
		return lastRead.Add(minGap)
	}
	return lastRead.Add(idleEvery)
}

// read takes the notifications written since the last read.
func (l *listener) read(ctx context.Context) error {
	l.mu.Lock()
	after := l.lastID
	l.lastRead = time.Now()
	l.mu.Unlock()
	rows, err := l.db.QueryContext(ctx, `SELECT id, topic, payload FROM `+l.table+` WHERE id > ? ORDER BY id LIMIT ?`, after, listenerBatch)
	if err != nil {
		return err
	}
	defer rows.Close()
	var got []notification
	for rows.Next() {
		var n notification
		if err := rows.Scan(&n.id, &n.topic, &n.payload); err != nil {
			return err
		}
		got = append(got, n)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// This read saw every commit signalled before it began; one signalled
	// since is waiting in l.woken.
	l.committed = false
	if len(got) > 0 && l.connected {
		l.pending = append(l.pending, got...)
		l.lastID = got[len(got)-1].id
		if len(got) == listenerBatch {
			// More are waiting: read again without a gap.
			l.lastRead = time.Time{}
		}
	}
	return nil
}

func (l *listener) lastRowID(ctx context.Context) (int64, error) {
	var id int64
	err := l.db.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM `+l.table).Scan(&id)
	return id, err
}

// commitSignal tells listeners that a transaction committed on the write
// connection. A listener that has not yet taken the last signal misses
// nothing by missing the next: one read takes everything written since.
type commitSignal struct {
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
}

func (s *commitSignal) subscribe() (<-chan struct{}, func()) {
	c := make(chan struct{}, 1)
	s.mu.Lock()
	if s.subs == nil {
		s.subs = map[chan struct{}]struct{}{}
	}
	s.subs[c] = struct{}{}
	s.mu.Unlock()
	return c, func() {
		s.mu.Lock()
		delete(s.subs, c)
		s.mu.Unlock()
	}
}

func (s *commitSignal) notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.subs {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}
