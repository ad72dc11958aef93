package recorder

import (
	"context"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The notified live tail (Redis 7: every topology).
//
// On Redis Cluster one XREAD may only name keys of one hash slot (CROSSSLOT otherwise, even
// when one node owns all of them), so a blocking XREAD over every followed stream is
// impossible there, and one blocking XREAD per stream or per slot would hold a connection
// each; on one server a blocking XREAD naming every followed stream costs, each round, what is
// followed rather than what was written. Instead every write that adds to a run's stream
// (append.lua, finish_run.lua) ends with a sharded publish (SPUBLISH) on a channel named like
// the stream's key, so in the stream's slot, and the tail holds one subscriber connection per
// master node (one on a single server or Sentinel): a bell. Each bell is SSUBSCRIBEd to the
// followed streams its node owns and is the node's one blocking reader; a message (or the
// confirmation of a subscription) marks its stream due, and the tail goroutine reads the due
// streams with non-blocking XREADs (on Cluster one per slot, pipelined), from the lowest
// position of their followers: the same read and the same seam as the blocking tail. Nothing
// is read while nothing is written.
//
// Streams are grouped by the master that owns their slot in the cluster client's slot map,
// and regrouped (the stream unsubscribed from the old node, subscribed on the new one, and read
// once) when a bell fails (connection lost, MOVED for a subscription; after a Sentinel
// failover the new bell reaches the new master), when the server ends a subscription itself
// (its slot left the node), after a read error, and every FollowBlock from the slot map, which
// go-redis reloads on MOVED/ASK and at least every DefaultClusterStateReload. Notifications
// missed in between (a publish on a slot's new owner before the bell moved there) are caught
// by the status read of quiet runs: a run whose stored last seq is beyond what its followers
// got is read again. A cluster whose servers have no sharded pub/sub (Redis 6) makes the tail
// read every followed stream every round instead, pausing FollowPoll after an empty one; a
// single server without it gets the blocking tail (run).

// bell is the tail's subscriber connection to one master node. The tail goroutine creates,
// subscribes and closes it; its own goroutine (listen) only receives. subscribed is guarded by
// tailer.mu.
type bell struct {
	addr       string
	ps         *redis.PubSub
	subscribed map[string]bool // events keys this bell is subscribed to
	failed     bool            // listen ended with an error; the tail replaces the bell
	closing    chan struct{}   // closed before ps is closed by the tail
	done       chan struct{}   // closed when listen returns
}

// bellEnd is the payload finish_run.lua publishes: the run's end is stored, so its status is
// read at once instead of after FollowBlock of quiet.
const bellEnd = "end"

// listen receives the bell's messages until it fails or is closed. A quiet connection is
// checked with PING every block+grace; two silent periods in a row fail it (a frozen node).
func (t *tailer) listen(b *bell) {
	defer close(b.done)
	silent := false
	for {
		msg, err := b.ps.ReceiveTimeout(context.Background(), t.block+tailGrace)
		select {
		case <-b.closing:
			return
		default:
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !silent {
				silent = true
				ctx, cancel := context.WithTimeout(context.Background(), t.block+tailGrace)
				err = b.ps.Ping(ctx)
				cancel()
				if err == nil {
					continue
				}
			}
			t.bellFailed(b, err)
			return
		}
		silent = false
		switch m := msg.(type) {
		case *redis.Message:
			t.ring(m.Channel, m.Payload == bellEnd)
		case *redis.Subscription:
			switch m.Kind {
			case "ssubscribe":
				t.ring(m.Channel, false) // subscribed: read once what came before
			case "sunsubscribe":
				t.unsubscribed(b, m.Channel)
			}
		}
	}
}

// ring marks a stream due for reading (and, at a run's end, for a status read) and wakes the
// tail goroutine.
func (t *tailer) ring(key string, end bool) {
	t.mu.Lock()
	if ts := t.streams[key]; ts != nil {
		t.due[key] = true
		if end {
			ts.lastCheck = time.Time{}
		}
	}
	t.mu.Unlock()
	t.wake()
}

// wake nudges the tail goroutine without waiting.
func (t *tailer) wake() {
	select {
	case t.wakeup <- struct{}{}:
	default:
	}
}

// unsubscribed handles an sunsubscribe for key. One the tail asked for concerns a stream no
// longer assigned to b and is ignored; otherwise the server ended the subscription because
// the slot left the node: the stream is read and regrouped.
func (t *tailer) unsubscribed(b *bell, key string) {
	t.mu.Lock()
	if ts := t.streams[key]; ts != nil && ts.bell == b {
		ts.bell = nil
		delete(b.subscribed, key)
		t.due[key] = true
		t.regroup = true
	}
	t.mu.Unlock()
	t.wake()
}

// bellFailed unassigns every stream of b, marks them due and asks for a regroup. A server
// without SSUBSCRIBE switches the tail to reading every stream every round.
func (t *tailer) bellFailed(b *bell, err error) {
	unknown := err != nil && strings.Contains(strings.ToLower(err.Error()), "unknown command")
	t.mu.Lock()
	b.failed = true
	for key := range b.subscribed {
		if ts := t.streams[key]; ts != nil && ts.bell == b {
			ts.bell = nil
			t.due[key] = true
		}
	}
	b.subscribed = map[string]bool{}
	t.regroup = true
	if unknown && !t.noBells {
		t.noBells = true
		t.s.log.Warn("recorder: the Redis Cluster has no sharded pub/sub (SSUBSCRIBE, Redis 7); the live tail polls every followed stream", "err", err)
	}
	t.mu.Unlock()
	if !unknown && !t.stopping() {
		t.s.log.Warn("recorder: live tail lost its subscriber connection to a cluster node; regrouping", "node", b.addr, "err", err)
	}
	t.wake()
}

// runCluster is the notified tail loop (Cluster, and single server or Sentinel on Redis 7):
// keep the bells in line with the slot map, read the due streams, hand the entries out, read
// the status of quiet runs; on a Redis error back off and regroup.
func (t *tailer) runCluster() {
	defer close(t.done)
	defer t.closeBells()
	backoff, failing := time.Duration(0), false
	fail := func(err error) bool {
		if t.stopping() {
			return false
		}
		if !failing {
			t.s.log.Warn("recorder: live tail cannot read Redis; retrying", "err", err)
			failing = true
		}
		t.mu.Lock()
		t.regroup = true
		t.mu.Unlock()
		if t.cc != nil {
			t.cc.ReloadState(context.Background())
		}
		backoff = min(max(2*backoff, 50*time.Millisecond), tailMaxBackoff)
		select {
		case <-time.After(backoff):
			return true
		case <-t.stop:
			return false
		}
	}
	var lastRegroup, lastQuiet time.Time
	for !t.stopping() {
		now := time.Now()
		if now.Sub(lastRegroup) >= t.block {
			t.mu.Lock()
			t.regroup = true
			t.mu.Unlock()
		}
		regrouped, err := t.assign()
		if err != nil {
			if !fail(err) {
				return
			}
			continue
		}
		if regrouped {
			lastRegroup = now
		}
		keys, sps := t.snapshotDue()
		var res []redis.XStream
		if len(keys) > 0 {
			var err error
			res, err = t.readCluster(keys, sps)
			t.endRead()
			if err == nil {
				if failing { // said before the entries are handed out: a reader of the log sees it first
					t.s.log.Info("recorder: live tail reads Redis again")
					failing = false
				}
				err = t.dispatch(t.cmd(), res, sps)
			}
			if err != nil {
				t.markDue(keys)
				if !fail(err) {
					return
				}
				continue
			}
			for _, st := range res {
				if len(st.Messages) >= tailReadCount {
					t.markDue([]string{st.Stream}) // more than one read's worth
				}
			}
		}
		if time.Since(lastQuiet) >= t.block || t.endDue() {
			if err := t.checkQuiet(t.cmd()); err != nil {
				if !fail(err) {
					return
				}
				continue
			}
			lastQuiet = time.Now()
		}
		if failing {
			t.s.log.Info("recorder: live tail reads Redis again")
			failing = false
		}
		backoff = 0
		t.mu.Lock()
		idle := len(t.due) == 0 && !t.regroup
		poll := t.noBells
		t.mu.Unlock()
		switch {
		case poll && len(res) == 0:
			if !t.pause() {
				return
			}
		case idle:
			wait := max(t.block-time.Since(lastQuiet), time.Millisecond)
			timer := time.NewTimer(wait)
			select {
			case <-t.wakeup:
			case <-timer.C:
			case <-t.stop:
				timer.Stop()
				return
			}
			timer.Stop()
		}
	}
}

// endDue reports whether a followed run's end was announced and its status not read yet.
func (t *tailer) endDue() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ts := range t.streams {
		if ts.lastCheck.IsZero() {
			return true
		}
	}
	return false
}

// markDue marks streams due for reading.
func (t *tailer) markDue(keys []string) {
	t.mu.Lock()
	for _, k := range keys {
		if t.streams[k] != nil {
			t.due[k] = true
		}
	}
	t.mu.Unlock()
}

// snapshotDue returns the due streams (every followed stream when the servers have no
// sharded pub/sub) with the lowest position of their followers, clears their marks and
// records them as in flight.
func (t *tailer) snapshotDue() ([]string, map[string]int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.noBells {
		for k := range t.streams {
			t.due[k] = true
		}
	}
	if len(t.due) == 0 {
		return nil, nil
	}
	keys := make([]string, 0, len(t.due))
	sps := make(map[string]int64, len(t.due))
	for key := range t.due {
		delete(t.due, key)
		ts := t.streams[key]
		if ts == nil {
			continue
		}
		keys = append(keys, key)
		sps[key] = ts.lowestFed()
	}
	t.inflight, t.unblocked = sps, false
	return keys, sps
}

// assign brings the bells in line with the followed streams: each stream subscribed on the
// bell of the master owning its slot (all streams re-checked when a regroup is due, else only
// the unassigned ones), streams nobody follows any more unsubscribed, failed and empty bells
// closed. A stream that moves is marked due, so what its old node published is read. It
// reports whether every stream was re-checked.
func (t *tailer) assign() (bool, error) {
	t.mu.Lock()
	regroup, noBells := t.regroup, t.noBells
	t.regroup = false
	slots := map[uint16]string{} // slot -> a key in it
	for key, ts := range t.streams {
		if regroup || ts.bell == nil || ts.bell.failed {
			slots[ts.slot] = key
		}
	}
	var stale []*bell
	for addr, b := range t.bells {
		if b.failed {
			stale = append(stale, b)
			delete(t.bells, addr)
		}
	}
	t.mu.Unlock()
	for _, b := range stale {
		t.closeBell(b)
	}
	if noBells {
		return regroup, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.block+tailGrace)
	defer cancel()
	owner := make(map[uint16]string, len(slots))
	clients := map[string]*redis.Client{}
	var firstErr error
	for slot, key := range slots {
		c, err := t.masterFor(ctx, key)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		addr := c.Options().Addr
		owner[slot], clients[addr] = addr, c
	}
	subs, unsubs := map[*bell][]string{}, map[*bell][]string{}
	t.mu.Lock()
	for key, ts := range t.streams {
		addr, ok := owner[ts.slot]
		if !ok || (ts.bell != nil && !ts.bell.failed && ts.bell.addr == addr) {
			continue
		}
		if ts.bell != nil {
			if !ts.bell.failed {
				unsubs[ts.bell] = append(unsubs[ts.bell], key)
			}
			delete(ts.bell.subscribed, key)
			ts.bell = nil
			t.due[key] = true
		}
		b := t.bells[addr]
		if b == nil {
			b = &bell{addr: addr, ps: clients[addr].SSubscribe(ctx), subscribed: map[string]bool{},
				closing: make(chan struct{}), done: make(chan struct{})}
			t.bells[addr] = b
			go t.listen(b)
		}
		ts.bell = b
		b.subscribed[key] = true
		subs[b] = append(subs[b], key)
	}
	var empty []*bell
	for addr, b := range t.bells {
		for key := range b.subscribed {
			if ts := t.streams[key]; ts == nil || ts.bell != b {
				delete(b.subscribed, key)
				unsubs[b] = append(unsubs[b], key)
			}
		}
		if len(b.subscribed) == 0 {
			empty = append(empty, b)
			delete(t.bells, addr)
		}
	}
	t.mu.Unlock()
	for _, b := range empty {
		t.closeBell(b)
		delete(unsubs, b)
	}
	for b, keys := range unsubs {
		for _, g := range bySlot(keys) { // SUNSUBSCRIBE, like every sharded command, takes one slot
			if err := b.ps.SUnsubscribe(ctx, g...); err != nil {
				t.bellFailed(b, err)
				break
			}
		}
	}
	for b, keys := range subs {
		for _, g := range bySlot(keys) {
			if err := b.ps.SSubscribe(ctx, g...); err != nil {
				t.bellFailed(b, err)
				break
			}
		}
	}
	if firstErr != nil {
		t.mu.Lock()
		t.regroup = true
		t.mu.Unlock()
	}
	return regroup && firstErr == nil, firstErr
}

// cmd is what the notified tail reads with: the cluster client, or the single server's (or
// Sentinel's) client.
func (t *tailer) cmd() tailCmdable {
	if t.cc != nil {
		return t.cc
	}
	return t.c
}

// masterFor returns the client of the master owning key: on one server (or Sentinel: the
// current master, which the client's connections follow) the tail's own client.
func (t *tailer) masterFor(ctx context.Context, key string) (*redis.Client, error) {
	if t.cc != nil {
		return t.cc.MasterForKey(ctx, key)
	}
	return t.c, nil
}

// shardedPubSub reports whether the single server (or Sentinel master) knows SSUBSCRIBE
// (Redis 7): then its tail is notified like the Cluster tail; else it blocks in one XREAD over
// every followed stream. A server that does not answer COMMAND INFO is assumed to (a failing
// subscription switches the tail to polling).
func (t *tailer) shardedPubSub() bool {
	ctx, cancel := context.WithTimeout(context.Background(), t.block+tailGrace)
	defer cancel()
	res, err := t.c.Do(ctx, "COMMAND", "INFO", "ssubscribe").Slice()
	if err != nil {
		return true
	}
	return len(res) == 1 && res[0] != nil
}

// bySlot groups keys by hash slot.
func bySlot(keys []string) [][]string {
	groups := map[uint16][]string{}
	for _, k := range keys {
		s := keySlot(k)
		groups[s] = append(groups[s], k)
	}
	out := make([][]string, 0, len(groups))
	for _, g := range groups {
		out = append(out, g)
	}
	return out
}

// closeBell stops b's goroutine and closes its connection.
func (t *tailer) closeBell(b *bell) {
	select {
	case <-b.closing:
	default:
		close(b.closing)
	}
	b.ps.Close()
	<-b.done
}

// closeBells closes every bell; the tail goroutine is ending.
func (t *tailer) closeBells() {
	t.mu.Lock()
	bells := make([]*bell, 0, len(t.bells))
	for addr, b := range t.bells {
		bells = append(bells, b)
		delete(t.bells, addr)
	}
	t.mu.Unlock()
	for _, b := range bells {
		t.closeBell(b)
	}
}

// readCluster reads the due streams: one non-blocking XREAD per slot (all the due streams of
// that slot in it), all in one pipeline, which go-redis splits by the master owning each slot
// and sends to the masters in parallel, one pooled connection each, following MOVED and ASK
// replies (slot migrations, failovers) with a reload of its slot map.
func (t *tailer) readCluster(keys []string, sps map[string]int64) ([]redis.XStream, error) {
	ctx, cancel := context.WithTimeout(context.Background(), t.block+tailGrace)
	defer cancel()
	groups := [][]string{keys} // one server: one XREAD
	if t.cc != nil {
		groups = bySlot(keys)
	}
	cmds := make([]*redis.XStreamSliceCmd, 0, len(groups))
	_, err := t.cmd().Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, g := range groups {
			args := make([]string, 0, 2*len(g))
			args = append(args, g...)
			for _, k := range g {
				args = append(args, seqID(sps[k]))
			}
			cmds = append(cmds, p.XRead(ctx, &redis.XReadArgs{Streams: args, Count: tailReadCount, Block: -1}))
		}
		return nil
	})
	var res []redis.XStream
	for _, c := range cmds {
		switch cerr := c.Err(); {
		case cerr == nil:
			res = append(res, c.Val()...)
		case !errors.Is(cerr, redis.Nil):
			return nil, cerr
		}
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	return res, nil
}
