package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(realMain(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// realMain parses args, runs the bench and prints the report; it returns the exit code:
// 0 when every run completed, 1 when some failed or the bench could not run, 2 on usage errors.
func realMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "agui-bench:", err)
		return 2
	}
	if opts.PlainProxy != "" {
		u, _ := checkTarget(opts.URL, opts.AllowRemote)
		if err := servePlainProxy(ctx, opts.PlainProxy, u); err != nil {
			fmt.Fprintln(stderr, "agui-bench:", err)
			return 1
		}
		return 0
	}
	res, err := bench(ctx, opts)
	if err != nil {
		fmt.Fprintln(stderr, "agui-bench:", err)
		return 1
	}
	if opts.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(res)
	} else {
		printText(stdout, res)
	}
	if len(res.Errors) > 0 || res.Follow != nil && len(res.Follow.Errors) > 0 {
		return 1
	}
	return 0
}

// parseFlags reads the command line. Every bound is checked here so the run loops cannot be
// unbounded.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("agui-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.URL, "url", "", "target URL: the demo agent or the proxy (required)")
	fs.IntVar(&o.C, "c", 1, "concurrent runs (1..10000)")
	fs.IntVar(&o.Events, "events", 100, "events per run asked from the agent (0..10000000)")
	fs.DurationVar(&o.Interval, "interval", time.Millisecond, "pause between events, whole milliseconds (0 = none)")
	fs.IntVar(&o.PID, "pid", 0, "measure this process's CPU and peak RSS (Linux /proc)")
	fs.IntVar(&o.AgentPID, "agent-pid", 0, "measure the agent's CPU too, and report the machine's CPU per event (agent, this tool, -pid, -redis) and the throughput it allows")
	fs.StringVar(&o.Scenario, "scenario", "bench", "demo agent scenario")
	fs.IntVar(&o.Size, "size", 0, "scenario size parameter in bytes (0 = agent default)")
	fs.DurationVar(&o.Duration, "duration", 10*time.Minute, "upper bound on the whole bench")
	fs.BoolVar(&o.JSON, "json", false, "print the report as JSON")
	fs.BoolVar(&o.AllowRemote, "allow-remote", false, "allow a non-loopback target")
	fs.IntVar(&o.MaxEvent, "max-event", 16<<20, "largest event accepted, bytes")
	fs.DurationVar(&o.Ramp, "ramp", 0, "soak mode: open the runs evenly over this long (0 = all at once)")
	fs.IntVar(&o.Runs, "runs", 1, "chat mode: runs each of the -c streams performs one after another, the next as soon as the previous ended (1..10000)")
	fs.BoolVar(&o.NewOnly, "history-new", false, "with -history: each POST carries only the run's new user message, as a client that keeps no history (the proxy hydrates it from the stored thread)")
	fs.BoolVar(&o.History, "history", false, "chat mode: each stream's runs continue one thread, each POST carrying the thread's messages so far and a new user message, as a chat client's (default: a thread per run)")
	fs.IntVar(&o.Attach, "attach", 0, "fan-out mode: attachers per run, opened once every run started (0..10000)")
	attachURLs := fs.String("attach-url", "", "comma-separated proxy origins the attachers use, round robin (default: -url's origin)")
	fs.IntVar(&o.AttachPID, "attach-pid", 0, "fan-out mode: measure the attachers' memory and CPU on this process (the -attach-url replica) instead of -pid")
	fs.StringVar(&o.AttachPrefix, "attach-prefix", "/agui/", "the proxies' attach prefix")
	fs.IntVar(&o.Follow, "follow", 0, "follow mode: idle ?follow=1 thread attachers per thread, opened once every run ended; then one more run per thread must reach each (0..10000)")
	fs.StringVar(&o.PprofURL, "pprof-url", "", "follow mode: origin of the target's pprof listener (AGUI_PPROF_LISTEN), to read heap and stack in use per follower after forced GCs")
	fs.StringVar(&o.Redis, "redis", "", "host:port of a Redis whose commands are counted (INFO stats)")
	fs.StringVar(&o.PlainProxy, "plain-proxy", "", "serve a plain httputil.ReverseProxy to -url on this address instead of benching")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if *attachURLs != "" {
		for a := range strings.SplitSeq(*attachURLs, ",") {
			o.AttachURLs = append(o.AttachURLs, strings.TrimRight(strings.TrimSpace(a), "/"))
		}
	}
	var errs []error
	if o.URL == "" {
		errs = append(errs, errors.New("-url is required"))
	} else if _, err := checkTarget(o.URL, o.AllowRemote); err != nil {
		errs = append(errs, err)
	}
	if o.C < 1 || o.C > 10000 {
		errs = append(errs, fmt.Errorf("-c %d: want 1..10000", o.C))
	}
	if o.Events < 0 || o.Events > 10_000_000 {
		errs = append(errs, fmt.Errorf("-events %d: want 0..10000000", o.Events))
	}
	if o.Interval < 0 || o.Interval > time.Minute {
		errs = append(errs, fmt.Errorf("-interval %v: want 0..1m", o.Interval))
	}
	if o.Duration <= 0 {
		errs = append(errs, fmt.Errorf("-duration %v: want > 0", o.Duration))
	}
	if o.Runs < 1 || o.Runs > 10000 {
		errs = append(errs, fmt.Errorf("-runs %d: want 1..10000", o.Runs))
	}
	if o.NewOnly && !o.History {
		errs = append(errs, errors.New("-history-new needs -history"))
	}
	if o.History && o.Runs < 2 {
		errs = append(errs, errors.New("-history needs -runs above 1 (chat mode)"))
	}
	if o.Runs > 1 && (o.Attach > 0 || o.Follow > 0) {
		errs = append(errs, errors.New("-runs above 1 (chat mode) does not combine with -attach or -follow"))
	}
	if o.Ramp < 0 || o.Ramp > time.Hour {
		errs = append(errs, fmt.Errorf("-ramp %v: want 0..1h", o.Ramp))
	}
	if o.Attach < 0 || o.C*o.Attach > 20000 {
		errs = append(errs, fmt.Errorf("-attach %d: want 0.. with -c × -attach at most 20000", o.Attach))
	}
	if o.Follow < 0 || o.C*o.Follow > 20000 {
		errs = append(errs, fmt.Errorf("-follow %d: want 0.. with -c × -follow at most 20000", o.Follow))
	}
	if o.Follow > 0 && o.Attach > 0 {
		errs = append(errs, errors.New("-follow and -attach are separate modes: give one"))
	}
	if o.PprofURL != "" {
		if _, err := checkTarget(o.PprofURL, o.AllowRemote); err != nil {
			errs = append(errs, fmt.Errorf("-pprof-url: %w", err))
		}
	}
	for _, a := range o.AttachURLs {
		if _, err := checkTarget(a, o.AllowRemote); err != nil {
			errs = append(errs, fmt.Errorf("-attach-url: %w", err))
		}
	}
	if !strings.HasPrefix(o.AttachPrefix, "/") || !strings.HasSuffix(o.AttachPrefix, "/") {
		errs = append(errs, fmt.Errorf("-attach-prefix %q: want /.../", o.AttachPrefix))
	}
	if o.PID < 0 || o.AttachPID < 0 || o.AgentPID < 0 || o.Size < 0 || o.MaxEvent < 1 {
		errs = append(errs, errors.New("-pid, -attach-pid, -agent-pid, -size and -max-event must not be negative"))
	}
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	return o, errors.Join(errs...)
}

// printText writes the human-readable report.
func printText(w io.Writer, r *result) {
	fmt.Fprintf(w, "target      %s scenario=%s c=%d events/run=%d interval=%dms\n",
		r.URL, r.Scenario, r.Concurrency, r.EventsPerRun, r.IntervalMs)
	fmt.Fprintf(w, "runs        %d completed of %d in %.3fs%s\n", r.RunsCompleted, r.Runs, r.WallSeconds,
		map[bool]string{true: " (cut by -duration)", false: ""}[r.DurationHit])
	fmt.Fprintf(w, "events      %d total, %.0f/s\n", r.Events, r.EventsPerSecond)
	fmt.Fprintf(w, "latency     p50 %.3fms  p90 %.3fms  p99 %.3fms  max %.3fms  (%d stamped events)\n",
		r.Latency.P50, r.Latency.P90, r.Latency.P99, r.Latency.Max, r.Latency.Count)
	if ph := r.LatencyByPhase; ph != nil {
		fmt.Fprintf(w, "  opening   p50 %.3fms  p99 %.3fms  (%d events sent before %dms)\n", ph.Opening.P50, ph.Opening.P99, ph.Opening.Count, ph.SteadyFromMs)
		fmt.Fprintf(w, "  steady    p50 %.3fms  p99 %.3fms  (%d events)\n", ph.Steady.P50, ph.Steady.P99, ph.Steady.Count)
		fmt.Fprintf(w, "  closing   p50 %.3fms  p99 %.3fms  (%d events sent from %dms)\n", ph.Closing.P50, ph.Closing.P99, ph.Closing.Count, ph.ClosingFromMs)
	}
	fmt.Fprintf(w, "first event p50 %.3fms  p99 %.3fms\n", r.FirstEvent.P50, r.FirstEvent.P99)
	if n := r.NextFirstEvent; n != nil {
		fmt.Fprintf(w, "  next runs p50 %.3fms  p99 %.3fms  (%d runs that followed another on their stream)\n", n.P50, n.P99, n.Count)
	}
	fmt.Fprintf(w, "connections %d opened, %.2f per run\n", r.Dials, r.DialsPerRun)
	fmt.Fprintf(w, "refused     %d  cut %d  (ramp %dms)\n", r.Refused, r.Cut, r.RampMs)
	if r.Target != nil {
		fmt.Fprintf(w, "target pid  %d: cpu %.3fs (%.2fus/event), peak rss %.1f MiB (start %.1f MiB, %.1f KiB/stream), peak fds %d\n",
			r.Target.PID, r.Target.CPUSeconds, r.Target.CPUMicrosPerEvt, float64(r.Target.PeakRSSBytes)/(1<<20),
			float64(r.Target.StartRSSBytes)/(1<<20), float64(r.Target.RSSPerStreamBytes)/1024, r.Target.PeakFDs)
	}
	if f := r.Fanout; f != nil {
		fmt.Fprintf(w, "fan-out     %d attachers (%d/run): %d completed, %d events, p50 %.3fms p99 %.3fms\n",
			f.Attachers, f.PerRun, f.Completed, f.Events, f.Latency.P50, f.Latency.P99)
		fmt.Fprintf(w, "fan-out mem rss %.1f -> %.1f MiB: %.1f KiB/attacher; cpu %.2fus/delivered event; redis %.2f commands/event once attached\n",
			float64(f.RSSBeforeBytes)/(1<<20), float64(f.RSSAfterBytes)/(1<<20), float64(f.RSSPerAttacherBytes)/1024, f.CPUMicrosPerDelivered, f.RedisPerLiveEvent)
		for k, n := range f.Errors {
			fmt.Fprintf(w, "fan-out err %d × %s\n", n, k)
		}
	}
	if f := r.Follow; f != nil {
		fmt.Fprintf(w, "follow      %d idle followers (%d/thread): %d got replay_complete; %d/%d later runs completed, reached %d followers\n",
			f.Followers, f.PerThread, f.ReplayComplete, f.NextRunsCompleted, f.NextRuns, f.Reached)
		fmt.Fprintf(w, "follow mem  rss %.1f -> %.1f MiB: %.1f KiB/follower; heap %.1f KiB + stack %.1f KiB/follower; %.2f goroutines/follower\n",
			float64(f.RSSBeforeBytes)/(1<<20), float64(f.RSSAfterBytes)/(1<<20), float64(f.RSSPerFollowerBytes)/1024,
			float64(f.HeapPerFollowerBytes)/1024, float64(f.StackPerFollowerBytes)/1024, f.GoroutinesPerFollower)
		for k, n := range f.Errors {
			fmt.Fprintf(w, "follow err  %d × %s\n", n, k)
		}
	}
	if r.Redis != nil {
		fmt.Fprintf(w, "redis       %d commands, %.3f per event\n", r.Redis.Commands, r.Redis.PerEvent)
	}
	fmt.Fprintf(w, "bench cpu   %.3fs\n", r.ClientCPU)
	if b := r.Budget; b != nil {
		fmt.Fprintf(w, "cpu budget  per event: agent %.2fus + bench %.2fus + target %.2fus + redis %.2fus = %.2fus; %.0f%% of %d cores busy; these costs allow %.0f events/s\n",
			b.AgentMicros, b.ClientMicros, b.TargetMicros, b.RedisMicros, b.TotalMicros, 100*b.Busy, b.Cores, b.Ceiling)
	}
	if len(r.Errors) == 0 {
		fmt.Fprintln(w, "errors      0")
		return
	}
	kinds := make([]string, 0, len(r.Errors))
	for k := range r.Errors {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		fmt.Fprintf(w, "errors      %d × %s\n", r.Errors[k], k)
	}
}
