package attach_test

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"testing"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/internal/redistest"
	"github.com/agui-proxy/agui-proxy/internal/runtest"
	"github.com/agui-proxy/agui-proxy/proxy"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/sse"
	"github.com/redis/go-redis/v9"
)

// flakyFollow is a real RedisStore whose first Follow fails as a Follow does when its read
// pool has no connection free within the pool timeout (thousands of simultaneous catch-ups).
type flakyFollow struct {
	*recorder.RedisStore
	follows atomic.Int64
}

func (f *flakyFollow) Follow(ctx context.Context, threadID, runID string, afterSeq int64) (recorder.Subscription, error) {
	if f.follows.Add(1) == 1 {
		return nil, fmt.Errorf("following run %q: %w", runID, redis.ErrPoolTimeout)
	}
	return f.RedisStore.Follow(ctx, threadID, runID, afterSeq)
}

// TestRunAttachCatchUpSurvivesStoreError attaches to a live run after its hub's backlog let go
// of the run's first events, so the attach reads them from the store (the catch-up), and that
// read fails once: the attacher still gets every event of the run once, in order, through
// RUN_FINISHED. (Before, the stream ended right after its headers, with no event: the
// "stream ended without RUN_FINISHED" of agui-bench fanout5 under load.)
func TestRunAttachCatchUpSurvivesStoreError(t *testing.T) {
	rs, err := recorder.NewRedisStore(t.Context(), recorder.RedisConfig{URL: redistest.Start(t).URL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	store := &flakyFollow{RedisStore: rs}
	e := newEnv(t, proxy.Config{Store: store})
	// ~330-byte events: 120 of them are more than the hub's 16 KiB backlog.
	res := e.post(t, t.Context(), runtest.RunBody("gap", "gap-1", "bench", `,"events":300,"size":200,"intervalMs":2`), nil)
	defer res.Body.Close()
	runtest.SkipEvents(t, sse.NewReader(res.Body, sse.Limits{}), 120)
	go io.Copy(io.Discard, res.Body)
	att := e.get(t, "/agui/threads/gap/runs/gap-1/events", nil)
	defer att.Body.Close()
	got := readEvents(t, att.Body)
	if store.follows.Load() == 0 {
		t.Fatal("no Follow call: the attach did not catch up from the store (the test proves nothing)")
	}
	runtest.WaitRunEnded(t, store, "gap", "gap-1")
	raw := rawRun(t, store, "gap", "gap-1")
	if len(got) == 0 || got[len(got)-1].typ != agui.RunFinished {
		t.Fatalf("attach stream of %d events (run has %d) ended without RUN_FINISHED", len(got), len(raw))
	}
	var lastSeq int64
	for _, ev := range got {
		c, err := recorder.ParseCursor(ev.id)
		if err != nil {
			t.Fatalf("id %q: %v", ev.id, err)
		}
		if c.Seq != lastSeq+1 {
			t.Fatalf("seq %d after %d: a gap or duplicate", c.Seq, lastSeq)
		}
		lastSeq = c.Seq
	}
	if lastSeq != int64(len(raw)) {
		t.Fatalf("attach ended at seq %d, run has %d", lastSeq, len(raw))
	}
}
