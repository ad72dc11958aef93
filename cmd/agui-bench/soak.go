package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/sse"
)

// fanout is what the attachers of fan-out mode saw.
type fanout struct {
	PerRun    int   `json:"attachers_per_run"`
	Attachers int   `json:"attachers"`
	Completed int   `json:"completed"`
	Events    int64 `json:"events"`
	// Latency is over the events sent after each attacher opened its stream (delivered live);
	// those sent before reach it from the store's history, and are not counted.
	Latency summary        `json:"latency"`
	Errors  map[string]int `json:"errors"`
	// AttachPID is the process the attachers' memory and CPU were measured on (0: -pid's).
	AttachPID int `json:"attach_pid,omitempty"`
	// RSSBeforeBytes is the target's VmRSS once every run had started, before the first
	// attacher; RSSAfterBytes once every attacher had its first event.
	RSSBeforeBytes int64 `json:"rss_before_bytes"`
	RSSAfterBytes  int64 `json:"rss_after_bytes"`
	// RSSPerAttacherBytes is (after - before) / attachers: the memory of one attached follower.
	RSSPerAttacherBytes int64 `json:"rss_per_attacher_bytes"`
	// CPUMicrosPerDelivered is the target's CPU divided by every event it delivered (to the
	// POSTing clients and to the attachers); with AttachPID, that process's CPU divided by the
	// events the attachers received.
	CPUMicrosPerDelivered float64 `json:"cpu_us_per_delivered_event"`
	// RedisPerLiveEvent is the Redis commands per event the POSTing clients received after
	// every attacher was attached: what following costs, without the attachers' own setup
	// (access checks, catch-up reads).
	RedisPerLiveEvent float64 `json:"redis_commands_per_live_event"`
	// liveCommands and liveEvents are the Redis commands and the POSTed events counted when
	// every attacher was attached.
	liveCommands, liveEvents int64
}

// redisUse is the Redis commands and network traffic the load cost.
type redisUse struct {
	Commands int64   `json:"commands"`
	PerEvent float64 `json:"commands_per_event"` // per event the POSTing clients received
	// NetInBytes and NetOutBytes are what the server received and sent (INFO
	// total_net_input_bytes, total_net_output_bytes; replication traffic excluded).
	NetInBytes  int64 `json:"net_in_bytes"`
	NetOutBytes int64 `json:"net_out_bytes"`
	// NetPerEventBytes is (in + out) per event the POSTing clients received.
	NetPerEventBytes float64 `json:"net_bytes_per_event"`
	// CPUMicros is the server's CPU time (INFO used_cpu_sys + used_cpu_user) over the load,
	// and CPUMicrosPerEvent that per event the POSTing clients received: the store's share of
	// the machine, beside the proxy's own (target.cpu_us_per_event).
	CPUMicros         int64   `json:"cpu_us"`
	CPUMicrosPerEvent float64 `json:"cpu_us_per_event"`
}

// redisInfo is what redisStats reads from INFO stats.
type redisInfo struct {
	commands, netIn, netOut int64
	cpuMicros               int64 // used_cpu_sys + used_cpu_user, in µs (0 when absent)
}

// attachStats is what one attacher saw.
type attachStats struct {
	events    int64
	latencies []int64
	err       string
}

// attachOne opens the run attach stream of threadID/runID on base and reads it to the run's
// end. attached is called once: at the first event, or when the stream ends without one.
func attachOne(ctx context.Context, client *http.Client, base, prefix, threadID, runID string, opts options, attached func()) attachStats {
	var st attachStats
	var once sync.Once
	defer once.Do(attached)
	opened := time.Now().UnixNano()
	res, r, errText := openEvents(ctx, client, base+prefix+"threads/"+url.PathEscape(threadID)+"/runs/"+url.PathEscape(runID)+"/events", opts)
	if errText != "" {
		st.err = errText
		return st
	}
	defer res.Body.Close()
	for {
		f, err := r.Next()
		now := time.Now()
		if err != nil {
			if errors.Is(err, io.EOF) {
				st.err = "stream ended without RUN_FINISHED"
			} else {
				st.err = classify(ctx, err)
			}
			return st
		}
		if !f.HasData {
			continue
		}
		once.Do(attached)
		st.events++
		// Live delivery only: an event sent before the attacher asked for the stream is
		// history it is sent again (its latency would be the attacher's arrival time).
		if ns, ok := sentNs(f.Data); ok && ns >= opened {
			st.latencies = append(st.latencies, now.UnixNano()-ns)
		}
		switch typ, _ := agui.EventType(f.Data); typ {
		case agui.RunFinished:
			return st
		case agui.RunError:
			st.err = "RUN_ERROR event"
			return st
		}
	}
}

// problemCode returns the "code" member of a problem+json body, or "".
func problemCode(body []byte) string {
	var p struct {
		Code string `json:"code"`
	}
	json.Unmarshal(body, &p)
	return p.Code
}

// sampler reads a process's resident set size and open descriptors periodically.
type sampler struct {
	pid      int
	startRSS int64
	done     chan struct{}
	exited   chan struct{}
	once     sync.Once

	mu    sync.Mutex
	fds   int
	rss   int64
	fdErr error
}

// startSampler reads pid's VmRSS now, then samples it and its descriptors every period until
// stop.
func startSampler(pid int, period time.Duration) (*sampler, error) {
	s := &sampler{pid: pid, done: make(chan struct{}), exited: make(chan struct{})}
	rss, err := procRSS(pid)
	if err != nil {
		return nil, err
	}
	s.startRSS, s.rss = rss, rss
	go func() {
		defer close(s.exited)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			s.sample()
			select {
			case <-s.done:
				return
			case <-t.C:
			}
		}
	}()
	return s, nil
}

func (s *sampler) sample() {
	n, err := countFDs(s.pid)
	rss, rerr := procRSS(s.pid)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.fdErr = err
	} else {
		s.fds = max(s.fds, n)
	}
	if rerr == nil {
		s.rss = rss
	}
}

// rssNow samples and returns the current VmRSS.
func (s *sampler) rssNow() int64 {
	s.sample()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rss
}

// peakFDs returns the largest descriptor count sampled (-1 when /proc/PID/fd is unreadable).
func (s *sampler) peakFDs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fdErr != nil && s.fds == 0 {
		return -1
	}
	return s.fds
}

func (s *sampler) stop() {
	s.once.Do(func() { close(s.done) })
	<-s.exited
}

// procRSS returns VmRSS, the current resident set size of process pid, in bytes.
func procRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseStatusKB(b, "VmRSS:")
}

// countFDs returns the number of open descriptors of process pid.
func countFDs(pid int) (int, error) {
	d, err := os.Open(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, err
	}
	defer d.Close()
	n := 0
	for {
		names, err := d.Readdirnames(4096)
		n += len(names)
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// redisCommands returns the total_commands_processed of the Redis server at addr (0 when addr
// is empty). It speaks just enough RESP for one INFO command.
func redisCommands(addr string) (int64, error) {
	st, err := redisStats(addr)
	return st.commands, err
}

// redisStats returns the command and network counters of the Redis server at addr (zero when
// addr is empty).
func redisStats(addr string) (redisInfo, error) {
	if addr == "" {
		return redisInfo{}, nil
	}
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return redisInfo{}, fmt.Errorf("redis %s: %w", addr, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "*3\r\n$4\r\nINFO\r\n$5\r\nstats\r\n$3\r\ncpu\r\n"); err != nil {
		return redisInfo{}, fmt.Errorf("redis %s: %w", addr, err)
	}
	return parseInfoStats(bufio.NewReader(c))
}

// parseInfoCommands reads an INFO reply (a RESP bulk string) and returns its
// total_commands_processed.
func parseInfoCommands(r *bufio.Reader) (int64, error) {
	st, err := parseInfoStats(r)
	return st.commands, err
}

// parseInfoStats reads an INFO reply (a RESP bulk string): total_commands_processed, which
// must be there, total_net_input_bytes / total_net_output_bytes, and used_cpu_sys +
// used_cpu_user (seconds, with a fraction) in µs (zero when absent).
func parseInfoStats(r *bufio.Reader) (redisInfo, error) {
	var st redisInfo
	head, err := r.ReadString('\n')
	if err != nil {
		return st, fmt.Errorf("redis INFO: %w", err)
	}
	if !strings.HasPrefix(head, "$") {
		return st, fmt.Errorf("redis INFO: reply %q, want a bulk string", strings.TrimSpace(head))
	}
	n, err := strconv.Atoi(strings.TrimSpace(head[1:]))
	if err != nil || n < 0 || n > 1<<20 {
		return st, fmt.Errorf("redis INFO: bulk length %q", strings.TrimSpace(head))
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return st, fmt.Errorf("redis INFO: %w", err)
	}
	found := false
	fields := map[string]*int64{"total_commands_processed:": &st.commands, "total_net_input_bytes:": &st.netIn, "total_net_output_bytes:": &st.netOut}
	for line := range strings.Lines(string(body)) {
		name, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		name += ":"
		v = strings.TrimSpace(v)
		if dst, ok := fields[name]; ok {
			x, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return st, fmt.Errorf("redis INFO: %s %w", name, err)
			}
			*dst = x
			found = found || name == "total_commands_processed:"
		} else if name == "used_cpu_sys:" || name == "used_cpu_user:" {
			secs, err := strconv.ParseFloat(v, 64)
			if err != nil || !(secs >= 0 && secs <= 1e12) { // NaN fails both
				return st, fmt.Errorf("redis INFO: %s %q", name, v)
			}
			st.cpuMicros += int64(math.Round(secs * 1e6))
		}
	}
	if !found {
		return st, errors.New("redis INFO: no total_commands_processed")
	}
	return st, nil
}

// servePlainProxy serves a plain httputil.ReverseProxy to upstream on addr until ctx ends: the
// baseline the proxy is compared with (flushes every write, like an SSE-aware proxy).
func servePlainProxy(ctx context.Context, addr string, upstream *url.URL) error {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 1024, 256
	rp := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(upstream); pr.SetXForwarded() },
		Transport:     t,
		FlushInterval: -1,
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// openEvents GETs an attach event stream and returns the response and a reader of its
// frames, or why it got none (a request error, a status other than 200 with the problem's
// code): the run attach and ?follow=1 modes open their streams alike.
func openEvents(ctx context.Context, client *http.Client, target string, opts options) (*http.Response, *sse.Reader, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, nil, "request: " + err.Error()
	}
	req.Header.Set("Accept", "text/event-stream")
	res, err := client.Do(req)
	if err != nil {
		return nil, nil, classify(ctx, err)
	}
	if res.StatusCode != http.StatusOK {
		defer res.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		msg := fmt.Sprintf("http status %d", res.StatusCode)
		if code := problemCode(b); code != "" {
			msg += " " + code
		}
		return nil, nil, msg
	}
	return res, sse.NewReader(res.Body, sse.Limits{MaxLineBytes: opts.MaxEvent, MaxFrameBytes: opts.MaxEvent}), ""
}
