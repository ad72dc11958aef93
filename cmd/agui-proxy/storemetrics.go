package main

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agui-proxy/agui-proxy/recorder"
)

// storeCollector exports the store's sizes (recorder.StatsReporter), read once per scrape.
type storeCollector struct {
	store                                  recorder.StatsReporter
	bytes, checkpoints, evictions, threads *prometheus.Desc
	// scanned counts the threads of a store that cannot count them cheaply (Redis).
	scanned *scanCounter
}

// threadScanEvery is how often, at most, the threads of a Redis store are counted (a SCAN of
// the keyspace, in the background): the gauge shows the last count.
const threadScanEvery = 5 * time.Minute

func newStoreCollector(s recorder.StatsReporter) *storeCollector {
	const ns = "agui_proxy"
	var scanned *scanCounter
	if sc, ok := s.(recorder.ThreadScanner); ok {
		scanned = &scanCounter{scanner: sc, every: threadScanEvery, count: -1}
	}
	return &storeCollector{
		store:   s,
		scanned: scanned,
		threads: prometheus.NewDesc(ns+"_store_threads",
			"Threads the store holds, every owner and route (the thread indexes' size): memory and disk at each scrape; Redis counted by a background SCAN at most every 5 minutes (the last count).",
			[]string{"store"}, nil),
		bytes: prometheus.NewDesc(ns+"_store_bytes",
			"What the store holds, by store kind: memory, the accounted size (AGUI_MEMORY_MAX_BYTES bounds it); disk, the file size; redis, the server's used_memory.",
			[]string{"store"}, nil),
		checkpoints: prometheus.NewDesc(ns+"_store_checkpoint_bytes",
			"Bytes of stored checkpoints (memory and disk stores).", []string{"store"}, nil),
		evictions: prometheus.NewDesc(ns+"_store_evictions_total",
			"Threads the memory store evicted to stay under AGUI_MEMORY_MAX_BYTES.", []string{"store"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.bytes
	ch <- c.checkpoints
	ch <- c.evictions
	ch <- c.threads
}

// Collect implements prometheus.Collector. A store that does not answer within a second
// exports nothing for that scrape.
func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st, err := c.store.StoreStats(ctx)
	if err != nil {
		return
	}
	if st.StoredBytes >= 0 {
		ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(st.StoredBytes), st.Kind)
	}
	if st.CheckpointBytes >= 0 {
		ch <- prometheus.MustNewConstMetric(c.checkpoints, prometheus.GaugeValue, float64(st.CheckpointBytes), st.Kind)
	}
	if st.Kind == "memory" {
		ch <- prometheus.MustNewConstMetric(c.evictions, prometheus.CounterValue, float64(st.Evictions), st.Kind)
	}
	threads := st.Threads
	if threads < 0 && c.scanned != nil {
		threads = c.scanned.value()
	}
	if threads >= 0 {
		ch <- prometheus.MustNewConstMetric(c.threads, prometheus.GaugeValue, float64(threads), st.Kind)
	}
}

// scanCounter counts a store's threads with a scan in the background, at most once per
// every, and answers the last completed count (-1 before the first). The scan goroutine is
// bounded by every (and ends at once when the store is closed).
type scanCounter struct {
	scanner recorder.ThreadScanner
	every   time.Duration

	mu      sync.Mutex
	count   int64
	started time.Time // of the last scan
	running bool
}

// value starts a scan when the last one is older than every, and returns the last count.
func (c *scanCounter) value() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running && (c.started.IsZero() || time.Since(c.started) >= c.every) {
		c.running, c.started = true, time.Now()
		go c.scan()
	}
	return c.count
}

func (c *scanCounter) scan() {
	ctx, cancel := context.WithTimeout(context.Background(), c.every)
	defer cancel()
	var n int64
	err := c.scanner.ScanThreads(ctx, func(string) error { n++; return nil })
	c.mu.Lock()
	defer c.mu.Unlock()
	c.running = false
	if err == nil {
		c.count = n
	}
}
