package main

import (
	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/sse"

	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// errRemote is returned for a non-loopback target without -allow-remote.
var errRemote = errors.New("target is not a loopback address (use -allow-remote)")

// options are the bench parameters, from the command line.
type options struct {
	URL      string
	C        int
	Events   int
	Interval time.Duration
	PID      int
	// AgentPID is the agent's process, whose CPU goes into Budget (0: not measured).
	AgentPID    int
	Scenario    string
	Size        int
	Duration    time.Duration
	JSON        bool
	AllowRemote bool
	MaxEvent    int
	// Ramp spreads the opening of the C runs evenly over this long (soak mode); 0 opens them
	// all at once.
	Ramp time.Duration
	// Runs is the number of runs each of the C streams performs one after another (chat
	// mode): a client that starts its next run as soon as the previous one ended, on the
	// connection the previous one used when the target keeps it open. 1: one run each.
	Runs int
	// History makes the chat mode's runs continue their stream's thread, as a chat client's
	// do: each POST carries the thread's messages so far (every earlier user message and the
	// agent's replies) and a new user message, and the proxy works out the run's parent and
	// which messages are new. Without it each run has a thread of its own (the run start's
	// cost without the history's).
	History bool
	// NewOnly, with History, makes each POST carry only the run's new user message, as a
	// client that keeps no history does (a reload, a second device): the proxy hydrates the
	// request from the thread it stored. The agent behind a baseline gets that one message.
	NewOnly bool
	// Attach is the number of attachers per run (fan-out mode): each opens the run attach
	// stream once the run has started and reads it to its end.
	Attach int
	// AttachURLs are the proxies the attachers connect to, round robin (default: the URL's
	// origin). Two proxies on one Redis measure cross-replica fan-out.
	AttachURLs []string
	// AttachPID, when set, is the process the attachers connect to (a second replica): the
	// fan-out's memory and CPU are measured on it instead of on PID.
	AttachPID int
	// AttachPrefix is the proxies' attach prefix.
	AttachPrefix string
	// Redis is a host:port whose INFO total_commands_processed is read before and after.
	Redis string
	// posted, when set, counts the events the POSTing clients received (set by bench).
	posted *atomic.Int64
	// Follow is the number of ?follow=1 thread attachers per thread (follow mode), opened
	// once every run has ended; one more run per thread follows once they are all idle.
	Follow int
	// PprofURL is the origin of the target's net/http/pprof listener: follow mode reads its
	// heap and stack in use there, after forced garbage collections.
	PprofURL string
	// PlainProxy, when set, serves a plain httputil.ReverseProxy to URL on this address
	// instead of running a bench (the baseline of scripts/loadtest.sh).
	PlainProxy string
}

// checkTarget parses the URL and refuses anything but http(s) to a loopback host, unless
// allowRemote: the tool can open thousands of streams and must not be aimed at a stranger.
func checkTarget(raw string, allowRemote bool) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("url %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("url %q: want http:// or https:// with a host", raw)
	}
	if allowRemote {
		return u, nil
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("url %q: %w", raw, errRemote)
	}
	return u, nil
}

// summary is a distribution in milliseconds.
type summary struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

// summarize sorts ns in place and returns its nearest-rank percentiles in milliseconds.
func summarize(ns []int64) summary {
	if len(ns) == 0 {
		return summary{}
	}
	slices.Sort(ns)
	at := func(p float64) float64 {
		i := int(p*float64(len(ns))+0.999999) - 1 // nearest rank: ceil(p*n)-1
		return float64(ns[min(max(i, 0), len(ns)-1)]) / 1e6
	}
	return summary{Count: len(ns), P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: float64(ns[len(ns)-1]) / 1e6}
}

// target holds what -pid measured.
type target struct {
	PID             int     `json:"pid"`
	CPUSeconds      float64 `json:"cpu_seconds"`
	CPUMicrosPerEvt float64 `json:"cpu_us_per_event"`
	PeakRSSBytes    int64   `json:"peak_rss_bytes"`
	// StartRSSBytes is VmRSS before the first stream opened.
	StartRSSBytes int64 `json:"start_rss_bytes"`
	// RSSPerStreamBytes is (peak - start) / streams (runs plus attachers).
	RSSPerStreamBytes int64 `json:"rss_per_stream_bytes"`
	// PeakFDs is the largest number of open descriptors sampled.
	PeakFDs int `json:"peak_fds"`
}

// budget is where the machine's CPU went, per event: the agent, this load generator, the target
// (a proxy; 0 when the target is the agent itself) and Redis (with -redis). When the total
// is near Cores × 1e6 µs per second of wall time, the run was bounded by the machine's CPU,
// and Ceiling is the most events per second these costs allow on it.
type budget struct {
	AgentMicros  float64 `json:"agent_us_per_event"`
	ClientMicros float64 `json:"client_us_per_event"`
	TargetMicros float64 `json:"target_us_per_event"`
	RedisMicros  float64 `json:"redis_us_per_event"`
	TotalMicros  float64 `json:"total_us_per_event"`
	Cores        int     `json:"cores"`
	// Busy is the share of the cores the four used over the run's wall time.
	Busy    float64 `json:"busy"`
	Ceiling float64 `json:"ceiling_events_per_second"`
}

// result is the bench report.
type result struct {
	URL             string  `json:"url"`
	Scenario        string  `json:"scenario"`
	Concurrency     int     `json:"concurrency"`
	EventsPerRun    int     `json:"events_per_run"`
	IntervalMs      int     `json:"interval_ms"`
	Runs            int     `json:"runs"`
	RunsCompleted   int     `json:"runs_completed"`
	Events          int64   `json:"events"`
	WallSeconds     float64 `json:"wall_seconds"`
	EventsPerSecond float64 `json:"events_per_second"`
	Latency         summary `json:"latency"`
	// LatencyByPhase splits Latency by when each event was sent (soak mode: with a ramp).
	LatencyByPhase *phases `json:"latency_by_phase,omitempty"`
	FirstEvent     summary `json:"time_to_first_event"`
	// NextFirstEvent is FirstEvent over the runs that followed another on their stream (chat
	// mode, -runs above 1).
	NextFirstEvent *summary `json:"next_run_first_event,omitempty"`
	// LastFirstEvent is FirstEvent over the last tenth of each stream's runs (at least its
	// last run; chat mode): with History, the runs on the longest threads.
	LastFirstEvent *summary `json:"last_runs_first_event,omitempty"`
	// History tells whether the chat mode's runs continued their stream's thread (-history).
	History bool `json:"history,omitempty"`
	// HistoryNew tells that each POST carried only its new message (-history-new).
	HistoryNew bool `json:"history_new,omitempty"`
	// Dials counts the connections the client opened to the target (the run streams; the
	// attachers and followers too); DialsPerRun divides it by the runs.
	Dials       int64          `json:"dials"`
	DialsPerRun float64        `json:"dials_per_run"`
	Errors      map[string]int `json:"errors"`
	DurationHit bool           `json:"duration_limit_hit"`
	Target      *target        `json:"target,omitempty"`
	ClientCPU   float64        `json:"client_cpu_seconds"`
	// Budget is the machine's CPU per event, process by process (with -agent-pid).
	Budget *budget `json:"cpu_budget,omitempty"`
	// Refused counts runs that got no event stream (an HTTP error status or no connection);
	// Cut counts runs whose stream started but ended without RUN_FINISHED.
	Refused int       `json:"refused"`
	Cut     int       `json:"cut"`
	RampMs  int       `json:"ramp_ms"`
	Fanout  *fanout   `json:"fanout,omitempty"`
	Follow  *follow   `json:"follow,omitempty"`
	Redis   *redisUse `json:"redis,omitempty"`
}

// phases splits the latency of a soak by when each event was sent: while the runs open (the
// ramp), between the ramp's end and the first run's end (every run streaming), and from the
// first run's end on (runs ending). A proxy's run start and end cost differ from its cost per
// event; the split tells which one a tail latency comes from.
type phases struct {
	Opening summary `json:"opening"`
	Steady  summary `json:"steady"`
	Closing summary `json:"closing"`
	// SteadyFromMs and ClosingFromMs are the phases' starts, from the bench's start.
	SteadyFromMs  int64 `json:"steady_from_ms"`
	ClosingFromMs int64 `json:"closing_from_ms"`
}

// splitPhases sorts the latencies of events sent at sent[i] (Unix ns) into the phases that
// start at steadyFrom and closingFrom (Unix ns; closingFrom may precede steadyFrom, when a
// run ends before the ramp does: then there is no steady phase).
func splitPhases(lat, sent []int64, start, steadyFrom, closingFrom int64) *phases {
	var opening, steady, closing []int64
	for i, ns := range sent {
		switch {
		case ns >= closingFrom:
			closing = append(closing, lat[i])
		case ns >= steadyFrom:
			steady = append(steady, lat[i])
		default:
			opening = append(opening, lat[i])
		}
	}
	return &phases{
		Opening: summarize(opening), Steady: summarize(steady), Closing: summarize(closing),
		SteadyFromMs: (steadyFrom - start) / 1e6, ClosingFromMs: (closingFrom - start) / 1e6,
	}
}

// runStats is what one run saw.
type runStats struct {
	events    int64
	latencies []int64  // receive time minus sentNs, ns
	sent      []int64  // sentNs of latencies[i] (Unix ns)
	replies   []string // ids of the messages the agent started (TEXT_MESSAGE_START), with History
	endNs     int64    // when RUN_FINISHED arrived (Unix ns), 0 when it did not
	ttfe      int64    // ns, -1 when no event arrived
	finished  bool
	err       string // "" when the run ended with RUN_FINISHED
	refused   bool   // no event stream was opened
}

// bench runs the load and measures it. It returns when every run has ended, at the latest
// at opts.Duration. With Ramp the runs open evenly over that time (soak mode); with Attach,
// once every run has started, Attach attachers per run open over the same ramp (fan-out mode);
// with Follow, once every run has ended, Follow ?follow=1 attachers per thread (follow mode).
func bench(ctx context.Context, opts options) (*result, error) {
	u, err := checkTarget(opts.URL, opts.AllowRemote)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Duration)
	defer cancel()
	dialer := &net.Dialer{Timeout: 30 * time.Second} // long: a loaded machine drops SYNs past the accept backlog
	var dials atomic.Int64
	client := &http.Client{Transport: &http.Transport{
		Proxy:               nil, // loopback traffic never goes through HTTP_PROXY
		MaxIdleConnsPerHost: opts.C,
		DisableCompression:  true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return dialer.DialContext(ctx, network, addr)
		},
	}}
	defer client.CloseIdleConnections()

	var cpu0, self0 float64
	var smp *sampler
	if opts.PID > 0 {
		if cpu0, err = procCPU(opts.PID); err != nil {
			return nil, fmt.Errorf("reading target cpu: %w", err)
		}
		if smp, err = startSampler(opts.PID, 250*time.Millisecond); err != nil {
			return nil, fmt.Errorf("reading target rss: %w", err)
		}
		defer smp.stop()
	}
	var agentCPU0 float64
	if opts.AgentPID > 0 {
		if agentCPU0, err = procCPU(opts.AgentPID); err != nil {
			return nil, fmt.Errorf("reading agent cpu: %w", err)
		}
	}
	var attCPU0 float64
	fanSmp := smp // the process whose memory the attachers cost
	if opts.AttachPID > 0 {
		if attCPU0, err = procCPU(opts.AttachPID); err != nil {
			return nil, fmt.Errorf("reading attach target cpu: %w", err)
		}
		if fanSmp, err = startSampler(opts.AttachPID, 250*time.Millisecond); err != nil {
			return nil, fmt.Errorf("reading attach target rss: %w", err)
		}
		defer fanSmp.stop()
	}
	redis0, err := redisStats(opts.Redis)
	if err != nil {
		return nil, err
	}
	self0, _ = procCPU(os.Getpid())

	opts.posted = new(atomic.Int64)
	runs := max(opts.Runs, 1)
	stats := make([]runStats, opts.C*runs) // stream i's k-th run at i*runs+k
	var wg sync.WaitGroup
	var started sync.WaitGroup // each stream's first run: its first event, or its end
	started.Add(opts.C)
	start := time.Now()
	tag := start.UnixNano()
	// (History: the text every reply is held with, as long as the bench scenario's answer.)
	reply := strings.Repeat("x", min(opts.Events*cmp.Or(opts.Size, 80), 1<<20))
	ramped(ctx, opts.C, opts.Ramp, func(i int) {
		wg.Go(func() {
			var history []json.RawMessage // (History: the thread's messages as its client holds them)
			if opts.History {
				history = []json.RawMessage{userMessage(benchRun(tag, i))}
			}
			stats[i*runs] = runOne(ctx, client, u.String(), opts, benchThread(tag, i), benchRun(tag, i), history, started.Done)
			for k := 1; k < runs && ctx.Err() == nil; k++ {
				next := fmt.Sprintf(".%d", k)
				if !opts.History { // a thread of its own: the run start's cost, not the history's
					stats[i*runs+k] = runOne(ctx, client, u.String(), opts, benchThread(tag, i)+next, benchRun(tag, i)+next, nil, func() {})
					continue
				}
				for _, id := range stats[i*runs+k-1].replies {
					history = append(history, assistantMessage(id, reply))
				}
				history = append(history, userMessage(benchRun(tag, i)+next))
				send := history
				if opts.NewOnly {
					send = history[len(history)-1:]
				}
				stats[i*runs+k] = runOne(ctx, client, u.String(), opts, benchThread(tag, i), benchRun(tag, i)+next, send, func() {})
			}
		})
	})
	var fo *fanout
	var atts []attachStats
	if opts.Attach > 0 {
		started.Wait()
		fo = &fanout{PerRun: opts.Attach, Attachers: opts.C * opts.Attach, Errors: map[string]int{}, AttachPID: opts.AttachPID}
		if fanSmp != nil {
			fo.RSSBeforeBytes = fanSmp.rssNow()
		}
		atts = make([]attachStats, fo.Attachers)
		var attached sync.WaitGroup
		attached.Add(fo.Attachers)
		bases := opts.AttachURLs
		if len(bases) == 0 {
			bases = []string{u.Scheme + "://" + u.Host}
		}
		ramped(ctx, fo.Attachers, opts.Ramp, func(j int) {
			i, base := j%opts.C, bases[j%len(bases)]
			wg.Go(func() {
				atts[j] = attachOne(ctx, client, base, opts.AttachPrefix, benchThread(tag, i), benchRun(tag, i), opts, attached.Done)
			})
		})
		attached.Wait()
		if opts.Redis != "" {
			live0, err := redisStats(opts.Redis)
			if err != nil {
				return nil, err
			}
			fo.liveCommands, fo.liveEvents = live0.commands, opts.posted.Load()
		}
		if fanSmp != nil {
			fo.RSSAfterBytes = fanSmp.rssNow()
			fo.RSSPerAttacherBytes = (fo.RSSAfterBytes - fo.RSSBeforeBytes) / int64(fo.Attachers)
		}
	}
	wg.Wait()
	wall := time.Since(start)
	var fol *follow
	if opts.Follow > 0 && ctx.Err() == nil {
		if fol, err = runFollow(ctx, client, u, opts, tag, smp); err != nil {
			return nil, err
		}
	}

	res := &result{
		URL: u.String(), Scenario: opts.Scenario, Concurrency: opts.C, EventsPerRun: opts.Events,
		IntervalMs: int(opts.Interval / time.Millisecond), Runs: len(stats), WallSeconds: wall.Seconds(),
		Errors: map[string]int{}, DurationHit: ctx.Err() != nil && errors.Is(context.Cause(ctx), context.DeadlineExceeded),
		RampMs: int(opts.Ramp / time.Millisecond), Fanout: fo, Follow: fol, History: opts.History && runs > 1, HistoryNew: opts.History && opts.NewOnly && runs > 1,
	}
	var lat, sent, ttfe, nextTTFE, lastTTFE []int64
	lastFrom := runs - max(1, runs/10) // (the last tenth of each stream's runs)
	closingFrom := int64(math.MaxInt64)
	for j, s := range stats {
		if s.latencies == nil {
			continue // a run the bench's -duration left unstarted (runOne always makes latencies)
		}
		if j%runs > 0 && s.ttfe >= 0 {
			nextTTFE = append(nextTTFE, s.ttfe)
			if j%runs >= lastFrom {
				lastTTFE = append(lastTTFE, s.ttfe)
			}
		}
		res.Events += s.events
		lat = append(lat, s.latencies...)
		sent = append(sent, s.sent...)
		if s.endNs > 0 {
			closingFrom = min(closingFrom, s.endNs)
		}
		if s.ttfe >= 0 {
			ttfe = append(ttfe, s.ttfe)
		}
		switch {
		case s.err == "":
			res.RunsCompleted++
		case s.refused:
			res.Refused++
		default:
			res.Cut++
		}
		if s.err != "" {
			res.Errors[s.err]++
		}
	}
	res.EventsPerSecond = float64(res.Events) / wall.Seconds()
	res.Dials = dials.Load()
	if n := res.RunsCompleted + res.Refused + res.Cut; n > 0 {
		res.DialsPerRun = float64(res.Dials) / float64(n)
	}
	if opts.Ramp > 0 {
		res.LatencyByPhase = splitPhases(lat, sent, start.UnixNano(), start.Add(opts.Ramp).UnixNano(), closingFrom)
	}
	res.Latency, res.FirstEvent = summarize(lat), summarize(ttfe)
	if runs > 1 {
		next, last := summarize(nextTTFE), summarize(lastTTFE)
		res.NextFirstEvent, res.LastFirstEvent = &next, &last
	}
	if fo != nil {
		var alat []int64
		for _, a := range atts {
			fo.Events += a.events
			alat = append(alat, a.latencies...)
			if a.err == "" {
				fo.Completed++
			} else {
				fo.Errors[a.err]++
			}
		}
		fo.Latency = summarize(alat)
	}
	if self1, err := procCPU(os.Getpid()); err == nil {
		res.ClientCPU = self1 - self0
	}
	if opts.Redis != "" {
		redis1, err := redisStats(opts.Redis)
		if err != nil {
			return nil, err
		}
		if fo != nil && fo.liveCommands > 0 {
			if n := opts.posted.Load() - fo.liveEvents; n > 0 {
				fo.RedisPerLiveEvent = float64(redis1.commands-fo.liveCommands-1) / float64(n)
			}
		}
		res.Redis = &redisUse{Commands: redis1.commands - redis0.commands - 1, // minus our own INFO
			NetInBytes: redis1.netIn - redis0.netIn, NetOutBytes: redis1.netOut - redis0.netOut,
			CPUMicros: redis1.cpuMicros - redis0.cpuMicros}
		if res.Events > 0 {
			res.Redis.CPUMicrosPerEvent = float64(res.Redis.CPUMicros) / float64(res.Events)
			res.Redis.PerEvent = float64(res.Redis.Commands) / float64(res.Events)
			res.Redis.NetPerEventBytes = float64(res.Redis.NetInBytes+res.Redis.NetOutBytes) / float64(res.Events)
		}
	}
	if opts.AttachPID > 0 && fo != nil && fo.Events > 0 {
		cpu1, err := procCPU(opts.AttachPID)
		if err != nil {
			return nil, fmt.Errorf("reading attach target cpu: %w", err)
		}
		fo.CPUMicrosPerDelivered = (cpu1 - attCPU0) / float64(fo.Events) * 1e6
	}
	if opts.PID > 0 {
		cpu1, err := procCPU(opts.PID)
		if err != nil {
			return nil, fmt.Errorf("reading target cpu: %w", err)
		}
		t := &target{PID: opts.PID, CPUSeconds: cpu1 - cpu0}
		if res.Events > 0 {
			t.CPUMicrosPerEvt = t.CPUSeconds / float64(res.Events) * 1e6
		}
		if fo != nil && opts.AttachPID == 0 && res.Events+fo.Events > 0 {
			fo.CPUMicrosPerDelivered = t.CPUSeconds / float64(res.Events+fo.Events) * 1e6
		}
		if t.PeakRSSBytes, err = procPeakRSS(opts.PID); err != nil {
			return nil, fmt.Errorf("reading target rss: %w", err)
		}
		smp.stop()
		t.StartRSSBytes, t.PeakFDs = smp.startRSS, smp.peakFDs()
		streams := int64(opts.C)
		if fo != nil {
			streams += int64(fo.Attachers)
		}
		if fol != nil {
			streams += int64(fol.Followers + fol.NextRuns)
		}
		t.RSSPerStreamBytes = (t.PeakRSSBytes - t.StartRSSBytes) / streams
		res.Target = t
	}
	if opts.AgentPID > 0 && res.Events > 0 {
		agentCPU1, err := procCPU(opts.AgentPID)
		if err != nil {
			return nil, fmt.Errorf("reading agent cpu: %w", err)
		}
		res.Budget = newBudget(res, agentCPU1-agentCPU0, opts.AgentPID == opts.PID)
	}
	return res, nil
}

// newBudget divides the CPU the run cost among its events: agentSeconds the agent's, and the
// client's, the target's and Redis's from res. targetIsAgent: the target is the agent served
// directly (its CPU is counted once, as the agent's).
func newBudget(res *result, agentSeconds float64, targetIsAgent bool) *budget {
	n := float64(res.Events)
	b := &budget{AgentMicros: agentSeconds / n * 1e6, ClientMicros: res.ClientCPU / n * 1e6, Cores: runtime.NumCPU()}
	if res.Target != nil && !targetIsAgent {
		b.TargetMicros = res.Target.CPUMicrosPerEvt
	}
	if res.Redis != nil {
		b.RedisMicros = res.Redis.CPUMicrosPerEvent
	}
	b.TotalMicros = b.AgentMicros + b.ClientMicros + b.TargetMicros + b.RedisMicros
	if b.TotalMicros > 0 {
		b.Ceiling = float64(b.Cores) * 1e6 / b.TotalMicros
	}
	if res.WallSeconds > 0 {
		b.Busy = b.TotalMicros * n / 1e6 / res.WallSeconds / float64(b.Cores)
	}
	return b
}

// ramped calls open(i) for i in [0, n), spreading the calls evenly over ramp (all at once
// when ramp is 0). It stops early when ctx ends.
func ramped(ctx context.Context, n int, ramp time.Duration, open func(i int)) {
	t0 := time.Now()
	for i := range n {
		if ramp > 0 {
			at := t0.Add(ramp * time.Duration(i) / time.Duration(n))
			if d := time.Until(at); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
				}
			}
		}
		open(i)
	}
}

// benchThread and benchRun are the ids of run i of the bench started at tag.
func benchThread(tag int64, i int) string { return fmt.Sprintf("bench-thread-%d-%d", tag, i) }
func benchRun(tag int64, i int) string    { return fmt.Sprintf("bench-%d-%d", tag, i) }

// runOne performs run runID on threadID with messages (nil: none) and reads its stream to the
// end. started is called once: at the first event, or when the run ends without one.
func runOne(ctx context.Context, client *http.Client, target string, opts options, threadID, runID string, messages []json.RawMessage, started func()) runStats {
	st := runStats{ttfe: -1, latencies: make([]int64, 0, min(opts.Events, 1<<20))}
	if opts.Ramp > 0 {
		st.sent = make([]int64, 0, cap(st.latencies))
	}
	var once sync.Once
	defer once.Do(started)
	props := map[string]any{"scenario": opts.Scenario, "events": opts.Events, "intervalMs": opts.Interval.Milliseconds()}
	if opts.Size > 0 {
		props["size"] = opts.Size
	}
	if messages == nil {
		messages = []json.RawMessage{}
	}
	body, _ := json.Marshal(map[string]any{
		"threadId": threadID, "runId": runID,
		"state": map[string]any{}, "messages": messages, "tools": []any{}, "context": []any{},
		"forwardedProps": props,
	})
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		st.err = "request: " + err.Error()
		return st
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	res, err := client.Do(req)
	if err != nil {
		st.err, st.refused = classify(ctx, err), true
		return st
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
		st.err, st.refused = fmt.Sprintf("http status %d", res.StatusCode), true
		return st
	}
	r := sse.NewReader(res.Body, sse.Limits{MaxLineBytes: opts.MaxEvent, MaxFrameBytes: opts.MaxEvent})
	for {
		f, err := r.Next()
		now := time.Now()
		if err != nil {
			switch {
			case errors.Is(err, io.EOF) && st.finished:
			case errors.Is(err, io.EOF):
				st.err = "stream ended without RUN_FINISHED"
			default:
				st.err = classify(ctx, err)
			}
			return st
		}
		if !f.HasData {
			continue // comments, heartbeats: not events
		}
		ev := f.Data
		if st.events == 0 {
			st.ttfe = int64(now.Sub(start))
			once.Do(started)
		}
		st.events++
		if opts.posted != nil {
			opts.posted.Add(1)
		}
		if ns, ok := sentNs(ev); ok {
			st.latencies = append(st.latencies, now.UnixNano()-ns)
			if opts.Ramp > 0 {
				st.sent = append(st.sent, ns)
			}
		}
		switch typ, _ := agui.EventType(ev); typ {
		case agui.TextMessageStart:
			if len(messages) > 0 {
				var m struct {
					MessageID string `json:"messageId"`
				}
				if json.Unmarshal(ev, &m) == nil && m.MessageID != "" {
					st.replies = append(st.replies, m.MessageID)
				}
			}
		case agui.RunFinished:
			st.finished, st.endNs = true, now.UnixNano()
		case agui.RunError:
			st.err = "RUN_ERROR event"
			return st
		}
	}
}

// userMessage is the user message a chat client sends to start run runID (History).
func userMessage(runID string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"id": "user-" + runID, "role": "user", "content": "next question, for run " + runID})
	return b
}

// assistantMessage is the agent's reply id as a chat client holds it after the run (History),
// with text, as long as the bench scenario's answer (events × size), not read from the deltas.
func assistantMessage(id, text string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"id": id, "role": "assistant", "content": text})
	return b
}

// classify turns a transport error into a short, countable kind.
func classify(ctx context.Context, err error) string {
	if ctx.Err() != nil {
		return "cut by -duration"
	}
	if errors.Is(err, sse.ErrFrameTooLarge) || errors.Is(err, sse.ErrLineTooLong) {
		return "event too large"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		msg = msg[i+2:] // drop per-connection addresses so errors group
	}
	return "transport: " + msg
}
