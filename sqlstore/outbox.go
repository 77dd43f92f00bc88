package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"parley"
)

// The outbox and its relay (docs/delivery.md): what closes the window
// between a commit and its publish. A node that commits a channel's events
// and dies (or fails to publish) before they reach the bus would otherwise
// leave them unseen by live clients until a later event of the channel
// showed the gap.
//
//   - Every write transaction that appends durable events upserts one row
//     per channel into channel_outbox (writeOutbox), before its COMMIT.
//   - After publishing, the committing node acknowledges: every AckInterval
//     it flushes the bus (the server has taken everything published before)
//     and deletes the rows up to the seqs it published (acker).
//   - Every node runs a relay: every Interval it takes the rows older than
//     Grace, publishes those channels' unacknowledged events from the log,
//     flushes, and deletes the rows. On PostgreSQL the rows are claimed with
//     SELECT … FOR UPDATE SKIP LOCKED, so relays on many nodes share the
//     work without a leader; on SQLite there is one process.
//
// A re-published event that had in fact been published is a duplicate on
// the bus, which every gateway drops by seq (gateway/order), so clients
// never see it twice.

// RelayConfig tunes the outbox's acknowledgements and the relay. The zero
// value of each field is a documented default.
type RelayConfig struct {
	// Off stops the relay (acknowledgements still run): events whose publish
	// was lost wait for a later event of their channel, as before the relay.
	// Tests only.
	Off bool
	// Interval is how often the relay looks for old rows (default 250 ms).
	// With Config.LiveConfig set, the live key relay_interval_ms rules.
	Interval time.Duration
	// Grace is how old a row must be before the relay publishes it (default
	// 1 s): well past a normal acknowledgement (AckInterval and a flush).
	// With Config.LiveConfig set, the live key relay_grace_ms rules.
	Grace time.Duration
	// AckInterval is how often a node acknowledges what it published
	// (default 100 ms).
	AckInterval time.Duration
	// Batch bounds the channels one relay pass takes (default 256).
	Batch int
	// NoOutbox writes no outbox rows and runs neither acknowledgements nor
	// the relay: the store as it was before the outbox. For the benchmark
	// that measures the outbox's cost (docs/benchmarks.md); never in a node.
	NoOutbox bool
}

// Defaults of RelayConfig.
const (
	DefaultRelayInterval    = 250 * time.Millisecond
	DefaultRelayGrace       = time.Second
	DefaultRelayAckInterval = 100 * time.Millisecond
	DefaultRelayBatch       = 256
	// relayMaxEvents bounds the events re-published for one channel in one
	// pass: the newest of them. Older ones reach the gateways as a gap that
	// they fill from the log.
	relayMaxEvents = 200
)

func (c RelayConfig) withDefaults() RelayConfig {
	if c.Interval <= 0 {
		c.Interval = DefaultRelayInterval
	}
	if c.Grace <= 0 {
		c.Grace = DefaultRelayGrace
	}
	if c.AckInterval <= 0 {
		c.AckInterval = DefaultRelayAckInterval
	}
	if c.Batch <= 0 {
		c.Batch = DefaultRelayBatch
	}
	return c
}

// checkedPublisher is a publisher that says whether every event reached
// the bus's connection (natsbus.Bus). Events of a failed call are not
// acknowledged, so the relay publishes them again.
type checkedPublisher interface {
	PublishChecked(events []parley.Event) error
}

// flusher is a publisher that can wait until the bus has taken everything
// published so far (parley.BusLink).
type flusher interface {
	Flush() error
}

// contextFlusher is a flusher whose wait a context bounds (natsbus.Bus).
type contextFlusher interface {
	FlushContext(ctx context.Context) error
}

// relayFlushTimeout bounds the relay's wait for the bus to take what it
// republished. The relay waits holding its claimed outbox rows' locks, and
// a post into one of those channels upserts the same row: with the bus
// down, an unbounded flush (the NATS client's own bound is 10 s) made such
// a post wait that long although it needs nothing of the bus.
const relayFlushTimeout = time.Second

// outboxRow is one channel's pending range.
type outboxRow struct {
	workspaceID, channelID string
	fromSeq, seq           int64
	since                  int64 // microseconds
}

// writeOutbox upserts the outbox row of every channel that events (those of
// one transaction about to commit) append to. Rows are written in channel
// order, so that two transactions never lock two rows in opposite orders.
func writeOutbox(ctx context.Context, q querier, now time.Time, events []parley.Event) error {
	type rng struct {
		ws       string
		from, to int64
	}
	var byChannel map[string]*rng
	for i := range events {
		ev := &events[i]
		if ev.Seq <= 0 || ev.ChannelID == "" {
			continue
		}
		if byChannel == nil {
			byChannel = make(map[string]*rng, 1)
		}
		if r := byChannel[ev.ChannelID]; r != nil {
			r.from, r.to = min(r.from, ev.Seq), max(r.to, ev.Seq)
		} else {
			byChannel[ev.ChannelID] = &rng{ev.WorkspaceID, ev.Seq, ev.Seq}
		}
	}
	if len(byChannel) == 0 {
		return nil
	}
	ids := make([]string, 0, len(byChannel))
	for id := range byChannel {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		r := byChannel[id]
		if _, err := q.ExecContext(ctx,
			`INSERT INTO channel_outbox (channel_id, workspace_id, from_seq, seq, since) VALUES ($1, $2, $3, $4, $5)
			 ON CONFLICT (channel_id) DO UPDATE SET
			   seq = CASE WHEN excluded.seq > channel_outbox.seq THEN excluded.seq ELSE channel_outbox.seq END`,
			id, r.ws, r.from, r.to, micros(now)); err != nil {
			return fmt.Errorf("outbox of %s: %w", id, err)
		}
	}
	return nil
}

// outbox runs a store's acknowledgements and relay.
type outbox struct {
	s     *Store
	cfg   RelayConfig
	flush func(context.Context) error // nil: the publisher cannot flush; publishing is taken as done

	mu      sync.Mutex
	pending map[string]outboxAck // channel → highest seq published, not yet acknowledged; guarded by mu

	// failpoint, when set, decides for each committed event whether its
	// publish is dropped (SetPublishFailpoint).
	failpoint atomic.Pointer[func(parley.Event) bool]

	started bool // start ran; set before the store is shared
	quit    chan struct{}
	wg      sync.WaitGroup
}

type outboxAck struct {
	workspaceID string
	seq         int64
}

func newOutbox(s *Store, cfg RelayConfig) *outbox {
	o := &outbox{s: s, cfg: cfg.withDefaults(), pending: map[string]outboxAck{}, quit: make(chan struct{})}
	if f, ok := s.pub.(contextFlusher); ok {
		o.flush = f.FlushContext
	} else if f, ok := s.pub.(flusher); ok {
		o.flush = func(context.Context) error { return f.Flush() }
	}
	return o
}

// start runs the acker and, unless it is off, the relay.
func (o *outbox) start() {
	o.started = true
	o.wg.Add(1)
	go o.loop(o.cfg.AckInterval, o.ackPending)
	if !o.cfg.Off {
		o.wg.Add(1)
		go o.relayLoop()
	}
}

// stop ends both loops and acknowledges what was published meanwhile.
func (o *outbox) stop() {
	close(o.quit)
	o.wg.Wait()
	o.ackPending()
}

func (o *outbox) loop(every time.Duration, fn func()) {
	defer o.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-o.quit:
			return
		case <-t.C:
			fn()
		}
	}
}

// relayLoop runs a relay pass every interval (read again after each pass,
// so that a live change takes effect at the next one).
func (o *outbox) relayLoop() {
	defer o.wg.Done()
	t := time.NewTimer(o.interval())
	defer t.Stop()
	for {
		select {
		case <-o.quit:
			return
		case <-t.C:
			o.relayOnce()
			t.Reset(o.interval())
		}
	}
}

// interval and grace are the relay's settings now: the live keys when the
// store has a live configuration, RelayConfig's otherwise.
func (o *outbox) interval() time.Duration {
	if o.s.liveCfg != nil {
		if ms := o.s.liveCfg.LiveConfig().RelayIntervalMS; ms > 0 {
			return time.Duration(ms) * time.Millisecond
		}
	}
	return o.cfg.Interval
}

func (o *outbox) grace() time.Duration {
	if o.s.liveCfg != nil {
		if ms := o.s.liveCfg.LiveConfig().RelayGraceMS; ms > 0 {
			return time.Duration(ms) * time.Millisecond
		}
	}
	return o.cfg.Grace
}

// publish hands a committed batch's events to the bus and notes the durable
// ones for acknowledgement. It is what the writers call after a commit.
func (o *outbox) publish(events []parley.Event) {
	if fp := o.failpoint.Load(); fp != nil {
		kept := events[:0:0]
		for _, ev := range events {
			if (*fp)(ev) {
				relayFailpointDrops.Inc()
				continue
			}
			kept = append(kept, ev)
		}
		events = kept
	}
	if len(events) == 0 {
		return
	}
	if cp, ok := o.s.pub.(checkedPublisher); ok {
		if err := cp.PublishChecked(events); err != nil {
			// Not acknowledged: the relay publishes them again.
			o.s.log.Warn("publish failed; the outbox relay will publish again", "events", len(events), "err", err)
			return
		}
	} else {
		o.s.pub.Publish(events)
	}
	o.mu.Lock()
	for _, ev := range events {
		if ev.Seq <= 0 || ev.ChannelID == "" {
			continue
		}
		if a, ok := o.pending[ev.ChannelID]; !ok || ev.Seq > a.seq {
			o.pending[ev.ChannelID] = outboxAck{ev.WorkspaceID, ev.Seq}
		}
	}
	o.mu.Unlock()
}

// ackPending flushes the bus and deletes the outbox rows up to what this
// node published. On a failed flush the marks are kept for the next round
// (and the relay may meanwhile publish the rows again).
func (o *outbox) ackPending() {
	o.mu.Lock()
	if len(o.pending) == 0 {
		o.mu.Unlock()
		return
	}
	acks := o.pending
	o.pending = make(map[string]outboxAck, len(acks))
	o.mu.Unlock()
	requeue := func() {
		o.mu.Lock()
		for id, a := range acks {
			if b, ok := o.pending[id]; !ok || a.seq > b.seq {
				o.pending[id] = a
			}
		}
		o.mu.Unlock()
	}
	if o.flush != nil {
		// No locks are held here: the NATS client's own bound will do.
		fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := o.flush(fctx)
		cancel()
		if err != nil {
			o.s.log.Warn("outbox: bus flush failed; acknowledgements wait", "channels", len(acks), "err", err)
			requeue()
			return
		}
	}
	ids := make([]string, 0, len(acks))
	for id := range acks {
		ids = append(ids, id)
	}
	slices.Sort(ids) // the row-lock order of writeOutbox
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	if o.s.dialect == Postgres {
		var busy []string
		busy, err = o.ackPostgres(ctx, ids, acks)
		if err == nil && len(busy) > 0 {
			o.mu.Lock()
			for _, id := range busy {
				if b, ok := o.pending[id]; !ok || acks[id].seq > b.seq {
					o.pending[id] = acks[id]
				}
			}
			o.mu.Unlock()
		}
	} else {
		err = o.s.write(ctx, "outbox.ack", func(ctx context.Context, tx *Tx) error {
			for _, id := range ids {
				if err := ackRow(ctx, tx, id, acks[id].seq, tx.now); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err != nil {
		o.s.log.Warn("outbox: acknowledgement failed", "channels", len(acks), "err", err)
		requeue()
	}
}

// ackPostgres acknowledges without ever waiting for a row lock: it takes
// the rows no writer holds (FOR UPDATE SKIP LOCKED), and returns the
// channels whose rows a writer held, to be acknowledged next round. A
// writer thus never queues behind an acknowledgement that itself queues
// behind other writers, and the two never deadlock.
func (o *outbox) ackPostgres(ctx context.Context, ids []string, acks map[string]outboxAck) (busy []string, err error) {
	tx, err := o.s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("outbox ack: begin: %w", err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT channel_id, seq FROM channel_outbox WHERE channel_id = ANY($1)
		ORDER BY channel_id FOR UPDATE SKIP LOCKED`, ids)
	if err != nil {
		return nil, fmt.Errorf("outbox ack: %w", err)
	}
	locked := map[string]int64{}
	for rows.Next() {
		var id string
		var seq int64
		if err := rows.Scan(&id, &seq); err != nil {
			rows.Close()
			return nil, fmt.Errorf("outbox ack: %w", err)
		}
		locked[id] = seq
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox ack: %w", err)
	}
	var gone []string
	now := txTime(o.s.now())
	for _, id := range ids {
		seq, ok := locked[id]
		switch {
		case !ok:
			continue
		case seq <= acks[id].seq:
			gone = append(gone, id)
		default:
			if _, err := tx.ExecContext(ctx,
				`UPDATE channel_outbox SET from_seq = $2, since = $3 WHERE channel_id = $1 AND from_seq <= $4`,
				id, acks[id].seq+1, micros(now), acks[id].seq); err != nil {
				return nil, fmt.Errorf("outbox ack %s: %w", id, err)
			}
		}
	}
	if len(gone) > 0 {
		if _, err := tx.ExecContext(ctx, `DELETE FROM channel_outbox WHERE channel_id = ANY($1)`, gone); err != nil {
			return nil, fmt.Errorf("outbox ack: %w", err)
		}
	}
	if len(locked) < len(ids) {
		// Rows not taken: gone already, or held by a writer right now. A
		// plain read (no lock, no wait) tells them apart.
		rows, err := tx.QueryContext(ctx, `SELECT channel_id FROM channel_outbox WHERE channel_id = ANY($1)`, ids)
		if err != nil {
			return nil, fmt.Errorf("outbox ack: %w", err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, fmt.Errorf("outbox ack: %w", err)
			}
			if _, ok := locked[id]; !ok {
				busy = append(busy, id)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("outbox ack: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("outbox ack: commit: %w", err)
	}
	return busy, nil
}

// ackRow records that channelID's events up to seq are on the bus: its row
// goes, or, when later events were committed meanwhile, starts after seq.
func ackRow(ctx context.Context, q querier, channelID string, seq int64, now time.Time) error {
	res, err := q.ExecContext(ctx, `DELETE FROM channel_outbox WHERE channel_id = $1 AND seq <= $2`, channelID, seq)
	if err != nil {
		return fmt.Errorf("outbox ack %s: %w", channelID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n > 0 {
		return err
	}
	if _, err := q.ExecContext(ctx,
		`UPDATE channel_outbox SET from_seq = $2, since = $3 WHERE channel_id = $1 AND from_seq <= $4`,
		channelID, seq+1, micros(now), seq); err != nil {
		return fmt.Errorf("outbox ack %s: %w", channelID, err)
	}
	return nil
}

// relayOnce runs one relay pass, logging a failure.
func (o *outbox) relayOnce() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	n, err := o.relay(ctx)
	relayPassSeconds.Observe(time.Since(start).Seconds())

	if err != nil {
		relayErrors.Inc()
		o.s.log.Warn("outbox relay pass failed", "err", err)
		return
	}
	if n > 0 {
		o.s.log.Info("outbox relay published events whose publish was lost", "events", n)
	}
}

// relay publishes the events of every outbox row older than the grace
// period, and acknowledges them; it returns how many events it published.
func (o *outbox) relay(ctx context.Context) (int, error) {
	cutoff := micros(txTime(o.s.now()).Add(-o.grace()))
	if o.s.dialect == Postgres {
		return o.relayPostgres(ctx, cutoff)
	}
	return o.relaySQLite(ctx, cutoff)
}

const outboxSelect = `SELECT o.channel_id, o.workspace_id, o.from_seq, o.seq, o.since FROM channel_outbox o
	WHERE o.since <= $1 ORDER BY o.since LIMIT $2`

// relayPostgres claims old rows with FOR UPDATE SKIP LOCKED, so that
// another node's relay takes other rows, and holds them until the events
// are on the bus and the rows are gone.
func (o *outbox) relayPostgres(ctx context.Context, cutoff int64) (int, error) {
	tx, err := o.s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("relay: begin: %w", err)
	}
	defer tx.Rollback()
	rows, err := scanOutbox(tx.QueryContext(ctx, outboxSelect+` FOR UPDATE SKIP LOCKED`, cutoff, o.cfg.Batch))
	if err != nil || len(rows) == 0 {
		return 0, err
	}
	n, err := o.republish(ctx, tx, rows)
	if err != nil {
		return 0, err
	}
	for _, r := range rows {
		// The row is locked: nobody changed it since it was read.
		if _, err := tx.ExecContext(ctx, `DELETE FROM channel_outbox WHERE channel_id = $1`, r.channelID); err != nil {
			return 0, fmt.Errorf("relay: delete %s: %w", r.channelID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("relay: commit: %w", err)
	}
	return n, nil
}

// relaySQLite reads old rows on a reader, publishes, and acknowledges
// through the writer like any node's acknowledgement: a row that got later
// events meanwhile stays, starting after what was published.
func (o *outbox) relaySQLite(ctx context.Context, cutoff int64) (int, error) {
	rows, err := scanOutbox(o.s.rdb.QueryContext(ctx, outboxSelect, cutoff, o.cfg.Batch))
	if err != nil || len(rows) == 0 {
		return 0, err
	}
	n, err := o.republish(ctx, o.s.rdb, rows)
	if err != nil {
		return 0, err
	}
	err = o.s.write(ctx, "outbox.relay", func(ctx context.Context, tx *Tx) error {
		for _, r := range rows {
			if err := ackRow(ctx, tx, r.channelID, r.seq, tx.now); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}

func scanOutbox(rows *sql.Rows, err error) ([]outboxRow, error) {
	if err != nil {
		return nil, fmt.Errorf("relay: read outbox: %w", err)
	}
	defer rows.Close()
	var out []outboxRow
	for rows.Next() {
		var r outboxRow
		if err := rows.Scan(&r.channelID, &r.workspaceID, &r.fromSeq, &r.seq, &r.since); err != nil {
			return nil, fmt.Errorf("relay: read outbox: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("relay: read outbox: %w", err)
	}
	return out, nil
}

// republish reads each row's events from the log (the newest relayMaxEvents
// of its range), gives them their topics again, publishes them and waits
// for the bus to take them.
func (o *outbox) republish(ctx context.Context, q querier, rows []outboxRow) (int, error) {
	now := o.s.now()
	var all []parley.Event
	for _, r := range rows {
		from := max(r.fromSeq, r.seq-relayMaxEvents+1)
		evRows, err := q.QueryContext(ctx, `SELECT channel_id, seq, type, data, created_at FROM events
			WHERE workspace_id = $1 AND channel_id = $2 AND seq >= $3 AND seq <= $4 ORDER BY seq`,
			r.workspaceID, r.channelID, from, r.seq)
		if err != nil {
			return 0, fmt.Errorf("relay: read log of %s: %w", r.channelID, err)
		}
		byChannel, err := scanEvents(evRows, map[string]string{r.channelID: r.workspaceID})
		if err != nil {
			return 0, fmt.Errorf("relay: read log of %s: %w", r.channelID, err)
		}
		evs := byChannel[r.channelID]
		if err := eventTopics(ctx, q, r.channelID, evs); err != nil {
			return 0, err
		}
		all = append(all, evs...)
		relayLagSeconds.Observe(now.Sub(fromMicros(r.since)).Seconds())
	}
	if len(all) == 0 {
		return 0, nil
	}
	if cp, ok := o.s.pub.(checkedPublisher); ok {
		if err := cp.PublishChecked(all); err != nil {
			return 0, fmt.Errorf("relay: publish: %w", err)
		}
	} else {
		o.s.pub.Publish(all)
	}
	if o.flush != nil {
		fctx, cancel := context.WithTimeout(ctx, relayFlushTimeout)
		err := o.flush(fctx)
		cancel()
		if err != nil {
			return 0, fmt.Errorf("relay: flush: %w", err)
		}
	}
	relayEvents.Add(float64(len(all)))
	relayChannels.Add(float64(len(rows)))
	return len(all), nil
}

// eventTopics gives events read back from a channel's log the topics they
// were first published on (eventlog.go's callers): the channel's own; the
// user's for a member joining or leaving; every member's for a channel's
// creation, and for the lifecycle events of a private channel or DM; and
// the workspace directory's for directory events.
func eventTopics(ctx context.Context, q querier, channelID string, evs []parley.Event) error {
	var kind string
	var members []string
	loaded := false
	for i := range evs {
		ev := &evs[i]
		topics := []string{parley.TopicChannel(channelID)}
		switch ev.Type {
		case parley.EventMemberJoined, parley.EventMemberLeft:
			var d parley.MemberEventData
			if err := json.Unmarshal(ev.Data, &d); err == nil && d.UserID != "" {
				topics = append(topics, parley.TopicUser(d.UserID))
			}
		case parley.EventChannelCreated, parley.EventChannelUpdated, parley.EventChannelArchived:
			if !loaded {
				loaded = true
				err := q.QueryRowContext(ctx, `SELECT kind FROM channels WHERE workspace_id = $1 AND id = $2`,
					ev.WorkspaceID, channelID).Scan(&kind)
				if errors.Is(err, sql.ErrNoRows) {
					// No channel row: no members to tell either. The
					// channel's own topic still carries the event.
					kind = string(parley.KindPublic)
				} else if err != nil {
					return fmt.Errorf("relay: kind of %s: %w", channelID, err)
				}
				if members, err = channelMemberIDs(ctx, q, ev.WorkspaceID, channelID); err != nil {
					return fmt.Errorf("relay: members of %s: %w", channelID, err)
				}
			}
			if ev.Type == parley.EventChannelCreated || kind != string(parley.KindPublic) {
				topics = append(topics, userTopics(members)...)
			}
		}
		ev.Topics = withDirectory(ev.WorkspaceID, ev.Type, topics)
	}
	return nil
}

// SetPublishFailpoint makes the store drop the publish of every committed
// event for which drop returns true, as if the node died between the commit
// and the publish: the event is neither published nor acknowledged, and
// only the relay brings it to the bus. Nil clears it. For tests; a store
// never sets it itself. It does nothing on a store without a publisher.
func (s *Store) SetPublishFailpoint(drop func(parley.Event) bool) {
	if s.ob == nil {
		return
	}
	if drop == nil {
		s.ob.failpoint.Store(nil)
		return
	}
	s.ob.failpoint.Store(&drop)
}

// OutboxBacklog returns how many channels have committed events not yet
// known to be on the bus, and when the oldest of them was committed (zero
// when none). Tests and operators' checks; it reads the whole outbox.
func (s *Store) OutboxBacklog(ctx context.Context) (int, time.Time, error) {
	var n int
	var oldest sql.NullInt64
	if err := s.rdb.QueryRowContext(ctx, `SELECT COUNT(*), MIN(since) FROM channel_outbox`).Scan(&n, &oldest); err != nil {
		return 0, time.Time{}, fmt.Errorf("outbox backlog: %w", err)
	}
	if !oldest.Valid {
		return n, time.Time{}, nil
	}
	return n, fromMicros(oldest.Int64), nil
}
