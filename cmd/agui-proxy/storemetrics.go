package main

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agui-proxy/agui-proxy/recorder"
)

// storeCollector exports the store's sizes (recorder.StatsReporter), read once per scrape.
type storeCollector struct {
	store                         recorder.StatsReporter
	bytes, checkpoints, evictions *prometheus.Desc
}

func newStoreCollector(s recorder.StatsReporter) *storeCollector {
	const ns = "agui_proxy"
	return &storeCollector{
		store: s,
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
}
