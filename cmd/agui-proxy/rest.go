package main

import (
	"context"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/thread"
)

// startRestCompaction starts compaction at rest (AGUI_COMPACT_AFTER, thread.RestSweeper) when
// it is on: one sweeper per process over the one store, whatever the routes (each replica
// sharing a store runs its own; see RestSweeper for why that is safe). Its goroutine stops
// when ctx is done; the returned func waits for it.
func startRestCompaction(ctx context.Context, cfg config, store recorder.Store, log *slog.Logger, reg prometheus.Registerer) (wait func(), err error) {
	if cfg.CompactAfter <= 0 || !cfg.Record {
		return func() {}, nil
	}
	svc, err := thread.New(thread.Config{Store: store, Logger: log})
	if err != nil {
		return nil, err
	}
	runs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agui_proxy_store_compactions_total",
		Help: "Runs examined by compaction at rest (AGUI_COMPACT_AFTER), by result: compacted (events replaced by their merged form), kept (left raw: merging would not shrink it or could change what a client replays), conflict (another replica compacted it first).",
	}, []string{"result"})
	if reg != nil {
		reg.MustRegister(runs)
	}
	names := map[thread.RestResult]string{thread.RestCompacted: "compacted", thread.RestKept: "kept", thread.RestConflict: "conflict"}
	sw, err := thread.NewRestSweeper(svc, cfg.CompactAfter, 0, func(r thread.RestResult) { runs.WithLabelValues(names[r]).Inc() })
	if err != nil {
		return nil, err
	}
	log.Info("compaction at rest", slog.Duration("after", cfg.CompactAfter))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sw.Run(ctx)
	}()
	return wg.Wait, nil
}
