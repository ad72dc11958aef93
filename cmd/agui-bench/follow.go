package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agui-proxy/agui-proxy/agui"
)

// replayComplete is the name of the CUSTOM event that ends an attach stream's prelude.
const replayComplete = "agui-proxy.replay_complete"

// follow is what follow mode measured: idle ?follow=1 thread attachers on threads whose run
// has ended, then one more run per thread that every follower must receive.
type follow struct {
	PerThread int `json:"followers_per_thread"`
	Followers int `json:"followers"`
	// ReplayComplete counts the followers that got the prelude's replay_complete marker.
	ReplayComplete int `json:"replay_complete"`
	// NextRuns and NextRunsCompleted count the later runs, one per thread, POSTed once every
	// follower was idle; Reached counts the followers that received their thread's later run
	// to its RUN_FINISHED.
	NextRuns          int            `json:"next_runs"`
	NextRunsCompleted int            `json:"next_runs_completed"`
	Reached           int            `json:"reached_by_next_run"`
	Errors            map[string]int `json:"errors"`
	// RSSBeforeBytes is the target's VmRSS once every run had ended, before the first
	// follower; RSSAfterBytes once every follower had its replay_complete marker (-pid).
	RSSBeforeBytes int64 `json:"rss_before_bytes"`
	RSSAfterBytes  int64 `json:"rss_after_bytes"`
	// RSSPerFollowerBytes is (after - before) / followers: the memory of one idle follower.
	RSSPerFollowerBytes int64 `json:"rss_per_follower_bytes"`
	// HeapInuse* and StackInuse* are the target's runtime.MemStats after a forced GC, read
	// from its pprof heap profile at the same two moments (-pprof-url); the per-follower
	// figures are (after - before) / followers.
	HeapInuseBeforeBytes  int64   `json:"heap_inuse_before_bytes,omitempty"`
	HeapInuseAfterBytes   int64   `json:"heap_inuse_after_bytes,omitempty"`
	StackInuseBeforeBytes int64   `json:"stack_inuse_before_bytes,omitempty"`
	StackInuseAfterBytes  int64   `json:"stack_inuse_after_bytes,omitempty"`
	HeapPerFollowerBytes  int64   `json:"heap_per_follower_bytes,omitempty"`
	StackPerFollowerBytes int64   `json:"stack_per_follower_bytes,omitempty"`
	GoroutinesBefore      int64   `json:"goroutines_before,omitempty"`
	GoroutinesAfter       int64   `json:"goroutines_after,omitempty"`
	GoroutinesPerFollower float64 `json:"goroutines_per_follower,omitempty"`
}

// followerStats is what one follower saw.
type followerStats struct {
	marker  bool // got the replay_complete marker
	reached bool // got the later run's RUN_FINISHED
	err     string
}

// nextRun is the id of the later run POSTed on thread i in follow mode.
func nextRun(tag int64, i int) string { return fmt.Sprintf("bench-next-%d-%d", tag, i) }

// runFollow opens opts.Follow ?follow=1 attachers on each of the C threads (their runs have
// ended), measures the target's memory once all are idle past the prelude, then POSTs one more
// run per thread and waits until each follower received it (bounded by ctx and a 60 s grace
// after the runs ended).
func runFollow(ctx context.Context, client *http.Client, u *url.URL, opts options, tag int64, smp *sampler) (*follow, error) {
	fo := &follow{PerThread: opts.Follow, Followers: opts.C * opts.Follow, NextRuns: opts.C, Errors: map[string]int{}}
	base := u.Scheme + "://" + u.Host
	before, err := readMemStats(ctx, client, opts.PprofURL)
	if err != nil {
		return nil, err
	}
	if smp != nil {
		fo.RSSBeforeBytes = smp.rssNow()
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stats := make([]followerStats, fo.Followers)
	var wg sync.WaitGroup
	var idle sync.WaitGroup // each follower: its marker, or its end
	idle.Add(fo.Followers)
	ramped(ctx, fo.Followers, opts.Ramp, func(j int) {
		i := j % opts.C
		wg.Go(func() {
			stats[j] = followOne(fctx, client, base, opts.AttachPrefix, benchThread(tag, i), nextRun(tag, i), opts, idle.Done)
		})
	})
	idle.Wait()
	after, err := readMemStats(ctx, client, opts.PprofURL)
	if err != nil {
		return nil, err
	}
	if smp != nil {
		fo.RSSAfterBytes = smp.rssNow()
		fo.RSSPerFollowerBytes = (fo.RSSAfterBytes - fo.RSSBeforeBytes) / int64(fo.Followers)
	}
	if opts.PprofURL != "" {
		n := int64(fo.Followers)
		fo.HeapInuseBeforeBytes, fo.HeapInuseAfterBytes = before.heapInuse, after.heapInuse
		fo.StackInuseBeforeBytes, fo.StackInuseAfterBytes = before.stackInuse, after.stackInuse
		fo.HeapPerFollowerBytes = (after.heapInuse - before.heapInuse) / n
		fo.StackPerFollowerBytes = (after.stackInuse - before.stackInuse) / n
		fo.GoroutinesBefore, fo.GoroutinesAfter = before.goroutines, after.goroutines
		fo.GoroutinesPerFollower = float64(after.goroutines-before.goroutines) / float64(n)
	}
	// The later runs: one per thread, read to their end like the first ones.
	var runs sync.WaitGroup
	next := make([]runStats, opts.C)
	for i := range opts.C {
		runs.Go(func() {
			next[i] = runOne(ctx, client, u.String(), opts, benchThread(tag, i), nextRun(tag, i), nil, func() {})
		})
	}
	runs.Wait()
	for _, s := range next {
		if s.err == "" {
			fo.NextRunsCompleted++
		} else {
			fo.Errors["next run: "+s.err]++
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second): // a follower that missed its run would wait for -duration
		cancel()
		<-done
	}
	for _, s := range stats {
		if s.marker {
			fo.ReplayComplete++
		}
		if s.reached {
			fo.Reached++
		}
		if s.err != "" {
			fo.Errors[s.err]++
		}
	}
	return fo, nil
}

// followOne opens the ?follow=1 attach stream of threadID on base, reads its prelude to the
// replay_complete marker (then calls idle), and reads on until the RUN_FINISHED of runID.
func followOne(ctx context.Context, client *http.Client, base, prefix, threadID, runID string, opts options, idle func()) followerStats {
	var st followerStats
	var once sync.Once
	defer once.Do(idle)
	res, r, errText := openEvents(ctx, client, base+prefix+"threads/"+url.PathEscape(threadID)+"/events?follow=1", opts)
	if errText != "" {
		st.err = errText
		return st
	}
	defer res.Body.Close()
	for {
		f, err := r.Next()
		if err != nil {
			switch {
			case errors.Is(err, io.EOF) && !st.marker:
				st.err = "stream ended before replay_complete"
			case errors.Is(err, io.EOF):
				st.err = "stream ended before the next run finished"
			case ctx.Err() != nil && st.marker:
				st.err = "next run not received"
			default:
				st.err = classify(ctx, err)
			}
			return st
		}
		if !f.HasData {
			continue
		}
		var ev struct {
			Type  string `json:"type"`
			Name  string `json:"name"`
			RunID string `json:"runId"`
		}
		switch typ, _ := agui.EventType(f.Data); typ {
		case agui.Custom:
			if !st.marker && json.Unmarshal(f.Data, &ev) == nil && ev.Name == replayComplete {
				st.marker = true
				once.Do(idle)
			}
		case agui.RunFinished:
			if st.marker && json.Unmarshal(f.Data, &ev) == nil && ev.RunID == runID {
				st.reached = true
				return st
			}
		}
	}
}

// memStats is what readMemStats reads from a Go process's heap profile.
type memStats struct {
	heapInuse, stackInuse, goroutines int64
}

// readMemStats forces three garbage collections in the process serving net/http/pprof at
// pprofURL (its origin) and returns its HeapInuse, StackInuse and goroutine count after
// them. It returns zeros when pprofURL is empty.
func readMemStats(ctx context.Context, client *http.Client, pprofURL string) (memStats, error) {
	var ms memStats
	if pprofURL == "" {
		return ms, nil
	}
	get := func(path string) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(pprofURL, "/")+path, nil)
		if err != nil {
			return nil, err
		}
		res, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
		if err == nil && res.StatusCode != http.StatusOK {
			err = fmt.Errorf("http status %d", res.StatusCode)
		}
		return b, err
	}
	var heap []byte
	var err error
	for range 3 { // a GC frees what the previous one's finalizers released; stacks shrink at GC
		if heap, err = get("/debug/pprof/heap?gc=1&debug=1"); err != nil {
			return ms, fmt.Errorf("pprof heap: %w", err)
		}
	}
	if ms.heapInuse, err = memStat(heap, "HeapInuse"); err != nil {
		return ms, err
	}
	if ms.stackInuse, err = memStat(heap, "Stack"); err != nil { // "# Stack = inuse / sys"
		return ms, err
	}
	g, err := get("/debug/pprof/goroutine?debug=1")
	if err != nil {
		return ms, fmt.Errorf("pprof goroutine: %w", err)
	}
	head, _, _ := strings.Cut(string(g), "\n")
	if _, err := fmt.Sscanf(head, "goroutine profile: total %d", &ms.goroutines); err != nil {
		return ms, fmt.Errorf("pprof goroutine: header %q: %w", head, err)
	}
	return ms, nil
}

// memStat returns N from the "# <name> = N" (or "N / M") line of a debug=1 heap profile (its
// runtime.MemStats).
func memStat(profile []byte, name string) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(profile))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "# "+name+" = "); ok {
			v, _, _ = strings.Cut(v, " / ")
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("pprof heap: %s: %w", name, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("pprof heap: no %s in the profile's MemStats", name)
}
