package recorder

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/agui-proxy/agui-proxy/panics"
)

// appendFinisher is a Store that stores a batch's events and finishes runs in one round trip
// (RedisStore: the append script applies FinishRun's rules to a run after its events).
// fins[i], when not nil, is the finish of batches[i]'s run. With a lease (not nil), the
// same call renews the lease of each running run that stores events, and out[i] (out is as
// long as batches) says whether batches[i]'s run's was. Like Append it is idempotent, so a
// failed call is sent again whole.
type appendFinisher interface {
	appendFinish(ctx context.Context, batches []Batch, fins []*finishOp, lease *appendLease, out []appendOutcome) error
}

// groupCommitter is a Store that commits each Append (and appendFinish) as one transaction
// whose cost is about the runs it touches, not their events (DiskStore: the pages a bbolt
// commit dirties and its fsync): the Writer's batches default to a lane's whole buffer
// there (WriterConfig.MaxBatchEvents), so that a slow commit makes the next one larger
// instead of the queue longer.
type groupCommitter interface {
	groupCommit()
}

// appendLease is the lease an append renews: node, and the expiry in ms since the epoch.
type appendLease struct {
	node    string
	untilMs int64
}

// appendOutcome is what an append with a lease did to one batch's run's lease.
type appendOutcome int8

// The outcomes, as append.lua answers them.
const (
	appendNotLeased appendOutcome = iota // not renewed (no event stored, the run not running)
	appendLeased                         // renewed
	appendStop                           // renewed, and RequestStop was called for the run
)

// writeResult is how writeAll ended.
type writeResult int8

const (
	writeDone     writeResult = iota // stored
	writeStopped                     // the writer was stopped first
	writePanicked                    // the store call panicked twice in a row
)

// write stores take (n events plus finishes), retrying until it succeeds; false means the
// writer was stopped first.
//
// A panic in the store call (a bug, or a dependency's on an input it should accept) does not
// end the writer: the batch is written again at once, and when that panics too it is written
// run by run, so that only a run whose own events make the store panic loses them. Those are
// counted as dropped, logged, and become a gap of the run (the store records it when the
// run's next event or its finish is stored); the run's finish is written on its own.
func (l *lane) write(take []item, n int) bool {
	switch l.writeAll(take, n) {
	case writeDone:
		return true
	case writeStopped:
		return false
	}
	for _, one := range splitRuns(take) {
		switch l.writeAll(one, countEvents(one)) {
		case writeStopped:
			return false
		case writePanicked:
			if !l.lose(one) {
				return false
			}
		}
	}
	return true
}

// splitRuns returns take's items grouped by run (one slice per run, the run's items in queue
// order), the runs in the order of their first item.
func splitRuns(take []item) [][]item {
	var out [][]item
	at := map[*Recording]int{}
	for _, it := range take {
		i, ok := at[it.rec]
		if !ok {
			i = len(out)
			at[it.rec] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], it)
	}
	return out
}

// countEvents returns the events among items (the rest are finishes).
func countEvents(items []item) int {
	n := 0
	for _, it := range items {
		if it.finish == nil {
			n++
		}
	}
	return n
}

// lose gives up the events of one run's items, on which the store panicked: they are counted
// as dropped and logged, and the run's finish among them (if any) is written alone. false
// means the writer was stopped first.
func (l *lane) lose(items []item) bool {
	var fins []item
	dropped := 0
	for _, it := range items {
		if it.finish != nil {
			fins = append(fins, it)
		} else {
			dropped++
		}
	}
	run := items[0].rec.run
	l.mu.Lock()
	l.st.Dropped += uint64(dropped)
	l.mu.Unlock()
	l.log.Error("recorder: the store panicked on a run's events; they are lost and the run is marked with a gap",
		"thread_id", run.ThreadID, "run_id", run.RunID, "events", dropped, "first_seq", items[0].ev.Seq)
	if len(fins) == 0 {
		return true
	}
	switch l.writeAll(fins, 0) {
	case writeStopped:
		return false
	case writePanicked:
		l.log.Error("recorder: the store panicked on a run's end; the run stays recorded as running until it is reaped",
			"thread_id", run.ThreadID, "run_id", run.RunID)
	}
	return true
}

// writeAll stores take (n events plus finishes), retrying after a store error until it
// succeeds (see write).
func (l *lane) writeAll(take []item, n int) writeResult {
	batches := l.batcher.group(take)
	defer l.batcher.release()
	l.lastRuns = len(batches)
	af, together := l.cfg.Store.(appendFinisher)
	var fins []*finishOp
	if together {
		batches, fins = l.batcher.finishes(take)
	}
	appended := n == 0
	var finished []bool // finished[i]: the i-th finish of take is stored
	backoff := l.cfg.RetryMin
	failing := false
	panicked := 0
	for {
		err := panics.Call(panics.Writer, l.log, func() error {
			if panics.Hooked() {
				for _, b := range batches {
					panics.Probe(panics.Writer, b.Run.ThreadID)
				}
			}
			if together {
				return l.attemptTogether(af, batches, fins, n)
			}
			return l.attempt(batches, n, &appended, take, &finished)
		})
		if err == nil {
			if failing {
				l.log.Info("recorder: store is writable again")
			}
			return writeDone
		}
		if errors.Is(err, panics.ErrPanicked) {
			if panicked++; panicked == 2 {
				return writePanicked
			}
			continue // written again at once: the store's calls are idempotent
		}
		l.mu.Lock()
		l.st.StoreErrors++
		l.st.Retries++
		l.mu.Unlock()
		if !failing {
			failing = true
			l.log.Warn("recorder: store write failed; buffering and retrying", "err", err, "queued", l.queued())
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-l.stop:
			t.Stop()
			return writeStopped
		}
		backoff = min(backoff*2, l.cfg.RetryMax)
	}
}

// attemptTogether stores take's events and finishes (batches, fins) in one call.
func (l *lane) attemptTogether(af appendFinisher, batches []Batch, fins []*finishOp, n int) error {
	if len(batches) == 0 {
		return nil
	}
	start := time.Now()
	l.count(func(st *WriterStats) { st.RoundTrips++ })
	var lease *appendLease
	var out []appendOutcome
	if wl := l.cfg.Lease; wl != nil {
		l.lease = appendLease{node: wl.Node, untilMs: leaseMs(start.Add(wl.TTL))}
		lease = &l.lease
		out = slices.Grow(l.outcomes[:0], len(batches))[:len(batches)]
		clear(out)
		l.outcomes = out
	}
	if err := af.appendFinish(l.stopCtx, batches, fins, lease, out); err != nil {
		return err
	}
	d := time.Since(start)
	if lease != nil {
		l.noteLeases(batches, fins, out, start)
	}
	finished := 0
	for _, f := range fins {
		if f != nil {
			finished++
		}
	}
	l.count(func(st *WriterStats) {
		st.Finished += uint64(finished)
		if n > 0 {
			st.Appended += uint64(n)
			st.Batches++
			st.BatchLatency += d
			st.BatchLatencyCount++
		}
	})
	return nil
}

// attempt makes one pass over the store calls still needed for a batch: the events, then the
// finishes not stored yet, one by one.
func (l *lane) attempt(batches []Batch, n int, appended *bool, take []item, finished *[]bool) error {
	ctx := l.stopCtx
	if !*appended {
		start := time.Now()
		l.count(func(st *WriterStats) { st.RoundTrips++ })
		if err := l.cfg.Store.Append(ctx, batches); err != nil {
			return err
		}
		d := time.Since(start)
		*appended = true
		l.count(func(st *WriterStats) {
			st.Appended += uint64(n)
			st.Batches++
			st.BatchLatency += d
			st.BatchLatencyCount++
		})
	}
	var fins []item // the finishes of take, in queue order
	for _, it := range take {
		if it.finish != nil {
			fins = append(fins, it)
		}
	}
	if len(fins) == 0 {
		return nil
	}
	if *finished == nil {
		*finished = make([]bool, len(fins))
	}
	done := *finished
	for i, it := range fins {
		if done[i] {
			continue
		}
		f := it.finish
		l.count(func(st *WriterStats) { st.RoundTrips++ })
		run := it.rec.run
		err := l.cfg.Store.FinishRun(ctx, run.ThreadID, run.RunID, f.status, f.detail, f.lastSeq)
		if errors.Is(err, ErrRunNotFound) || errors.Is(err, ErrThreadNotFound) {
			// The store lost the run: re-create its metadata (the store records the gap from
			// lastSeq), then finish it.
			l.count(func(st *WriterStats) { st.RoundTrips += 2 })
			if err = l.cfg.Store.Append(ctx, []Batch{{Run: run}}); err == nil {
				err = l.cfg.Store.FinishRun(ctx, run.ThreadID, run.RunID, f.status, f.detail, f.lastSeq)
			}
		}
		if err != nil {
			return err // stop at the first failure, as the store is failing
		}
		done[i] = true
		l.count(func(st *WriterStats) { st.Finished++ })
	}
	return nil
}

// noteLeases records the leases an append renewed at start (out[i] for batches[i]), forgets
// the runs it finished, and calls OnStop for the runs asked to stop.
func (l *lane) noteLeases(batches []Batch, fins []*finishOp, out []appendOutcome, start time.Time) {
	stops := false
	at := start.UnixNano()
	for i, b := range batches {
		switch {
		case fins != nil && fins[i] != nil:
			b.rec.leasedAt.Store(0)
		case out[i] != appendNotLeased:
			b.rec.leasedAt.Store(at)
			stops = stops || out[i] == appendStop
		}
	}
	if !stops || l.cfg.Lease.OnStop == nil {
		return
	}
	for i, b := range batches {
		if out[i] == appendStop && (fins == nil || fins[i] == nil) {
			l.cfg.Lease.OnStop(b.Run)
		}
	}
}

func (l *lane) count(f func(*WriterStats)) {
	l.mu.Lock()
	f(&l.st)
	l.mu.Unlock()
}

// batcher turns queued items into one Batch per run, events in queue order, reusing its
// memory from one batch to the next: at thousands of slow streams a batch holds one event of
// each of thousands of runs, and a fresh Batch (with its Run) and event slice per run per
// batch was most of what recording allocated. Used by the writer's goroutine only.
type batcher struct {
	gen     uint64 // of the batch being built: a Recording whose gen is this one has a batch in it
	batches []Batch
	counts  []int
	at      []int // at[i]: the batch of take[i] (-1 for a finish)
	events  []Event
}

// maxKeptBatches bounds the batches a batcher keeps room for between batches.
const maxKeptBatches = 4096

// group returns take's batches; they are valid until release.
func (g *batcher) group(take []item) []Batch {
	g.gen++
	n := 0
	g.at = g.at[:0]
	for _, it := range take {
		if it.finish != nil {
			g.at = append(g.at, -1)
			continue
		}
		i := g.batchOf(it.rec)
		g.at = append(g.at, i)
		g.counts[i]++
		n++
	}
	if cap(g.events) < n {
		g.events = make([]Event, n)
	}
	off := 0
	for i := range g.batches {
		g.batches[i].Events = g.events[off : off : off+g.counts[i]]
		off += g.counts[i]
	}
	for j, it := range take {
		if i := g.at[j]; i >= 0 {
			g.batches[i].Events = append(g.batches[i].Events, it.ev)
		}
	}
	return g.batches
}

// finishes adds the finishes of take, the items of the last group, to its batches: fins[i] is
// the finish of batches[i]'s run (nil: none), and a run finished without events in take gets
// a batch of its own, without events. fins is nil when take holds no finish.
func (g *batcher) finishes(take []item) (batches []Batch, fins []*finishOp) {
	for _, it := range take {
		if it.finish == nil {
			continue
		}
		i := g.batchOf(it.rec)
		fins = append(fins, make([]*finishOp, len(g.batches)-len(fins))...) // (no allocation for the make)
		fins[i] = it.finish
	}
	return g.batches, fins
}

// batchOf returns the index of rec's batch, adding one without events when it has none.
func (g *batcher) batchOf(rec *Recording) int {
	if rec.gen == g.gen {
		return rec.batch
	}
	i := len(g.batches)
	rec.gen, rec.batch = g.gen, i
	g.batches = append(g.batches, Batch{Run: rec.run, rec: rec})
	g.counts = append(g.counts, 0)
	return i
}

// release lets go of the last batches' runs and frames, keeping the memory for the next.
func (g *batcher) release() {
	clear(g.batches)
	clear(g.events)
	g.batches, g.counts = g.batches[:0], g.counts[:0]
	if cap(g.batches) > maxKeptBatches {
		g.batches, g.counts = nil, nil
	}
	if cap(g.at) > 8*maxKeptBatches {
		g.at = nil
	}
	if cap(g.events) > 8*maxKeptBatches {
		g.events = nil
	}
}
