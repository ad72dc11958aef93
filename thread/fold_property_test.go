package thread_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/compact"
	"github.com/agui-proxy/agui-proxy/compact/compacttest"
	"github.com/agui-proxy/agui-proxy/hydrate"
	"github.com/agui-proxy/agui-proxy/thread"
)

// TestBranchFoldProperty: generated threads, cut into runs at their RUN_STARTED events and
// recorded run after run as the proxy records them (each run's checkpoint built as it ends,
// with its kept events or read back), mostly each on the run before it, sometimes on an
// older run (a fork: the parent's fold is gone or taken), sometimes by a second service on
// the same store (another replica: no fold in memory). After every run its branch, read from
// the checkpoints, replays under both builds of the client to the messages and state of the
// raw events of its lineage; and while every run of a lineage was built in one service from
// the first, it is byte for byte the compaction of those raw events.
func TestBranchFoldProperty(t *testing.T) {
	thread.KeepEveryFold(t)
	n := 150
	if testing.Short() {
		n = 40
	}
	fastShapes, total := 0, 0 // branches hydration reads from their snapshots, branches
	defer func() {
		t.Logf("fast shapes: %d of %d", fastShapes, total)
		if !t.Failed() && fastShapes == 0 {
			t.Error("no branch had the shape hydration reads from its snapshots")
		}
	}()
	for seed := range uint64(n) {
		events := compacttest.Generate(seed, 40+int(seed%160), false)
		rng := rand.New(rand.NewPCG(seed, 0xb7a9))
		var runs [][]compact.Event
		for _, e := range events {
			if e.Type == agui.RunStarted || len(runs) == 0 {
				runs = append(runs, nil)
			}
			runs[len(runs)-1] = append(runs[len(runs)-1], e)
		}
		s := newService(t, thread.Config{})
		other := newService(t, thread.Config{Store: s.Store()})
		lineage := map[string][]compact.Event{}
		whole := map[string]bool{"": true} // branches built by s alone from the first run
		var ids []string
		for k, run := range runs {
			runID, parent, svc := fmt.Sprintf("r%d", k), "", s
			if k > 0 {
				parent = ids[k-1]
				if rng.IntN(5) == 0 {
					parent = ids[rng.IntN(k)]
				}
			}
			if rng.IntN(6) == 0 {
				svc = other
			}
			datas := make([]string, len(run))
			for i, e := range run {
				datas[i] = string(e.Raw)
			}
			r, records := storeRun(t, svc, "t", runID, parent, datas...)
			var kept *thread.KeptEvents
			if rng.IntN(4) > 0 {
				kept = keptOf(t, records)
			}
			if err := svc.CheckpointEnded(t.Context(), r, kept); err != nil {
				t.Fatalf("seed %d, %s: %v", seed, runID, err)
			}
			ids = append(ids, runID)
			lineage[runID] = append(append([]compact.Event(nil), lineage[parent]...), run...)
			whole[runID] = whole[parent] && svc == s && (k == 0 || parent == ids[k-1])

			total++
			got, err := s.Branch(t.Context(), "t", runID)
			if err != nil {
				t.Fatalf("seed %d, %s: Branch = %v", seed, runID, err)
			}
			raw := lineage[runID]
			for _, build := range []func([]compact.Event) ([]byte, []byte, error){replayBrowser, replayNode} {
				gm, gs, gerr := build(got)
				wm, ws, werr := build(raw)
				if gerr != nil || werr != nil || !bytes.Equal(gm, wm) || !bytes.Equal(gs, ws) {
					t.Fatalf("seed %d, %s (parent %q): the branch replays to\n%s\n%s (%v)\nthe raw events to\n%s\n%s (%v)",
						seed, runID, parent, gm, gs, gerr, wm, ws, werr)
				}
			}
			// Hydration reads an ended branch's snapshots instead of replaying it: the same
			// messages (each value byte for byte) and state.
			if fast, ok, replayed, err := thread.HydrationInputs(got); ok {
				fastShapes++
				if err != nil || !sameInput(fast, replayed) {
					t.Fatalf("seed %d, %s: hydration reads the branch's snapshots as\n%s\n%s\nits replay gives\n%s\n%s (%v)",
						seed, runID, fast.Messages, fast.State, replayed.Messages, replayed.State, err)
				}
			}
			if whole[runID] {
				want, _, err := compact.Readable(raw, compact.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if !compacttest.Equal(got, want) {
					t.Fatalf("seed %d, %s: the branch is not the compaction of its raw events:\n%s\nwant\n%s", seed, runID, rawOf(got), rawOf(want))
				}
			}
		}
	}
}

// sameInput reports whether two hydration inputs hold the same messages, each byte for byte,
// and the same state.
func sameInput(a, b hydrate.Branch) bool {
	if len(a.Messages) != len(b.Messages) || !bytes.Equal(a.State, b.State) {
		return false
	}
	for i := range a.Messages {
		if !bytes.Equal(a.Messages[i], b.Messages[i]) {
			return false
		}
	}
	return true
}

func replayBrowser(events []compact.Event) ([]byte, []byte, error) {
	m, s, err := compact.Replay(events)
	return m, s, err
}

func replayNode(events []compact.Event) ([]byte, []byte, error) {
	m, s, err := compact.ReplayCommonJS(events)
	return m, s, err
}

// TestBranchStats: a run's end on a branch whose fold the service kept counts as folded;
// a first run, a fork (the fold went to the first child) and a run whose parent another
// service built count as compacted.
func TestBranchStats(t *testing.T) {
	thread.KeepEveryFold(t)
	s := newService(t, thread.Config{})
	other := newService(t, thread.Config{Store: s.Store()})
	end := func(svc *thread.Service, runID, parent string) {
		t.Helper()
		r, records := storeRun(t, svc, "t", runID, parent, chatRun("t", runID, "m-"+runID)...)
		if err := svc.CheckpointEnded(t.Context(), r, keptOf(t, records)); err != nil {
			t.Fatal(err)
		}
	}
	end(s, "r1", "")
	end(s, "r2", "r1")
	end(s, "r3", "r2")
	end(s, "fork", "r2")
	end(other, "r4", "r3")
	if f, c := s.BranchStats(); f != 2 || c != 2 {
		t.Fatalf("BranchStats = %d folded, %d compacted; want 2 and 2", f, c)
	}
	if f, c := other.BranchStats(); f != 0 || c != 1 {
		t.Fatalf("the other service's BranchStats = %d folded, %d compacted; want 0 and 1", f, c)
	}
}
