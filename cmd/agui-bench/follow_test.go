package main

import (
	"net/http"
	"net/http/httptest"
	"net/http/pprof"
	"os"
	"testing"
)

// startPprof serves net/http/pprof for this process, like the proxy's AGUI_PPROF_LISTEN.
func startPprof(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestFollowMode follows threads through the proxy once their runs ended: every follower
// gets the replay_complete marker, then its thread's later run, and the memory figures are
// read from this process (the proxy runs in it).
func TestFollowMode(t *testing.T) {
	opts := baseOptions(startProxy(t))
	opts.C, opts.Follow, opts.Events, opts.Interval, opts.PID = 2, 3, 5, 0, os.Getpid()
	opts.AttachPrefix, opts.PprofURL = "/agui/", startPprof(t)
	res, err := bench(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	f := res.Follow
	if res.RunsCompleted != 2 || f == nil || f.Followers != 6 || f.ReplayComplete != 6 || len(f.Errors) != 0 {
		t.Fatalf("bench(follow) = %+v, follow %+v, want 2 runs and 6 followers past replay_complete", res, f)
	}
	if f.NextRuns != 2 || f.NextRunsCompleted != 2 || f.Reached != 6 {
		t.Errorf("follow = %+v, want 2 later runs completed, reaching all 6 followers", f)
	}
	// Each idle follower holds at least the proxy's handler goroutine and the client's reader.
	if f.RSSAfterBytes <= 0 || f.HeapInuseAfterBytes <= 0 || f.StackInuseAfterBytes <= 0 || f.GoroutinesAfter-f.GoroutinesBefore < 12 {
		t.Errorf("follow = %+v, want rss, heap and stack read and ≥ 12 more goroutines", f)
	}
}

// TestFollowModeWithoutFollowSupport counts the followers of a target with no attach route.
func TestFollowModeWithoutFollowSupport(t *testing.T) {
	opts := baseOptions(startDemo(t))
	opts.C, opts.Follow, opts.Events, opts.Interval, opts.AttachPrefix = 1, 2, 3, 0, "/agui/"
	res, err := bench(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if f := res.Follow; f == nil || f.ReplayComplete != 0 || f.Reached != 0 || len(f.Errors) == 0 {
		t.Errorf("bench(follow, demo agent) follow = %+v, want errors and nothing reached", f)
	}
}

func TestMemStat(t *testing.T) {
	p := []byte("heap profile: 1: 2 [3: 4] @ heap/1048576\n\n# runtime.MemStats\n# HeapInuse = 123456\n# Stack = 7890 / 9000\n# Bad = x\n")
	if n, err := memStat(p, "HeapInuse"); err != nil || n != 123456 {
		t.Errorf("memStat(HeapInuse) = %d, %v, want 123456", n, err)
	}
	if n, err := memStat(p, "Stack"); err != nil || n != 7890 {
		t.Errorf("memStat(Stack) = %d, %v, want 7890 (in use of in use / sys)", n, err)
	}
	if _, err := memStat(p, "Bad"); err == nil {
		t.Error("memStat(Bad) = nil error, want one (not a number)")
	}
	if _, err := memStat(p, "HeapSys"); err == nil {
		t.Error("memStat(HeapSys) = nil error, want one (absent)")
	}
}
