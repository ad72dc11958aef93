package thread_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/panics"
	"github.com/agui-proxy/agui-proxy/thread"
)

// TestCompactAtRestPanicContained: a panic while one thread's run is compacted at rest
// (forced through panics.SetHook) leaves that run raw and counted, is not retried by the next
// sweep, and the other thread's runs are compacted by the same sweep.
func TestCompactAtRestPanicContained(t *testing.T) {
	for name, store := range restStores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			s := newService(t, thread.Config{Store: store})
			for _, th := range []string{"poisoned", "other"} {
				for i := 1; i <= 2; i++ {
					run := fmt.Sprintf("r%d", i)
					recordRun(t, s, th, run, "", textRun(th, run, th+run)...)
				}
			}
			fired := 0
			defer panics.SetHook(func(where panics.Where, key string) {
				if where == panics.Sweep && key == "poisoned" {
					fired++
					panic("a forced panic at rest")
				}
			})()
			before := panics.Count(panics.Sweep)
			results := map[thread.RestResult]int{}
			sw, err := thread.NewRestSweeper(newService(t, thread.Config{Store: store}), time.Nanosecond, time.Hour, func(r thread.RestResult) { results[r]++ })
			if err != nil {
				t.Fatal(err)
			}
			if err := sw.Sweep(ctx); err != nil {
				t.Fatalf("Sweep = %v", err)
			}
			for _, run := range []string{"r1", "r2"} {
				p, err := store.Run(ctx, "poisoned", run)
				if err != nil || !p.CompactedAt.IsZero() {
					t.Errorf("poisoned/%s after the sweep: %+v, %v; want it left raw", run, p, err)
				}
				o, err := store.Run(ctx, "other", run)
				if err != nil || o.CompactedAt.IsZero() {
					t.Errorf("other/%s after the sweep: %+v, %v; want it compacted", run, o, err)
				}
			}
			if got := panics.Count(panics.Sweep) - before; got != 2 || fired != 2 {
				t.Errorf("%d panics counted (%d fired), want 2 (one per poisoned run)", got, fired)
			}
			if err := sw.Sweep(ctx); err != nil || fired != 2 {
				t.Errorf("a second sweep: %v, %d panics fired, want the poisoned runs left alone", err, fired)
			}
		})
	}
}
