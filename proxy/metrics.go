package proxy

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/panics"
)

// metrics holds the proxy's Prometheus collectors. A nil *metrics records nothing, so the hot
// path only pays a nil check when Config.Registerer is nil.
type metrics struct {
	runs           *prometheus.CounterVec // by outcome
	eventsIn       map[string]prometheus.Counter
	eventsInOther  prometheus.Counter
	bytesIn        prometheus.Counter
	eventsOut      prometheus.Counter
	bytesOut       prometheus.Counter
	clientsDropped prometheus.Counter
	attached       *prometheus.GaugeVec
	resumes        *prometheus.CounterVec
	prelude        *prometheus.HistogramVec
	threadsDeleted prometheus.Counter
	threadsListed  prometheus.Counter
	hydrated       *prometheus.CounterVec // by what: messages, state
	irregular      *prometheus.CounterVec // by kind (irregularKinds)
	nonSSEFrames   prometheus.Counter
	nonSSEBytes    prometheus.Counter
}

// knownEventTypes bounds the event_type label: agent-chosen unknown types count as "OTHER".
var knownEventTypes = []string{agui.RunStarted, agui.RunFinished, agui.RunError, agui.StepStarted, agui.StepFinished,
	agui.TextMessageStart, agui.TextMessageContent, agui.TextMessageEnd, agui.TextMessageChunk,
	agui.ToolCallStart, agui.ToolCallArgs, agui.ToolCallEnd, agui.ToolCallChunk, agui.ToolCallResult,
	agui.StateSnapshot, agui.StateDelta, agui.MessagesSnapshot, agui.ActivitySnapshot, agui.ActivityDelta,
	agui.ReasoningStart, agui.ReasoningMessageStart, agui.ReasoningMessageContent, agui.ReasoningMessageEnd,
	agui.ReasoningMessageChunk, agui.ReasoningEnd, agui.ReasoningEncryptedValue,
	agui.SubagentStarted, agui.SubagentFinished, agui.SubagentError, agui.Raw, agui.Custom,
	agui.ThinkingStart, agui.ThinkingEnd, agui.ThinkingTextMessageStart, agui.ThinkingTextMessageContent, agui.ThinkingTextMessageEnd}

// newMetrics registers the proxy's collectors with reg; nil reg returns nil.
func newMetrics(reg prometheus.Registerer, h *Handler) *metrics {
	if reg == nil {
		return nil
	}
	const ns = "agui_proxy"
	m := &metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "runs_total",
			Help: "Runs that ended, by outcome (finished, error, interrupted, cancelled, or the RUN_ERROR code the proxy appended)."}, []string{"outcome"}),
		eventsIn: map[string]prometheus.Counter{},
		bytesIn: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "upstream_bytes_total",
			Help: "Bytes of run streams read from agents."}),
		eventsOut: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "client_events_total",
			Help: "Frames delivered to run clients (live POST streams)."}),
		bytesOut: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "client_bytes_total",
			Help: "Bytes delivered to run clients (live POST streams)."}),
		clientsDropped: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "slow_clients_dropped_total",
			Help: "Clients disconnected because they fell behind their queue limit."}),
		attached: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "attached_clients",
			Help: "Clients attached through the attach endpoints or a resume, by kind."}, []string{"kind"}),
		resumes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "resumes_total",
			Help: "Reconnections with an event id, by result (exact, full_history)."}, []string{"result"}),
		prelude: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "prelude_seconds",
			Help: "Time to build and send the prelude of an attach or resume stream.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}, []string{"kind"}),
		threadsDeleted: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "threads_deleted_total",
			Help: "Threads deleted through DELETE {prefix}threads/{thread}."}),
		threadsListed: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "threads_listed_total",
			Help: "Threads returned by thread listings and bulk exports (index entries read)."}),
		nonSSEFrames: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "upstream_non_sse_frames_total",
			Help: "Frames of agents' run streams holding lines that are not SSE (neither a comment nor a data, event, id or retry field): forwarded as sent, never recorded; an unterminated one the stream ends in is dropped."}),
		nonSSEBytes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "upstream_non_sse_bytes_total",
			Help: "Bytes of the frames counted in upstream_non_sse_frames_total."}),
		hydrated: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "hydrated_runs_total",
			Help: "Run requests whose messages or state the proxy rebuilt from the stored branch (AGUI_HYDRATE), by what."}, []string{"what"}),
		irregular: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "upstream_irregular_events_total",
			Help: "Events of agents' responses that bend a run's lifecycle, by kind: kept_after_finished (AGUI_AFTER_TERMINAL=keep), refused_after_finished (refuse), refused_after_error, run_started_again, run_started_other_run."}, []string{"kind"}),
	}
	events := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "upstream_events_total",
		Help: "Events read from agents, by AG-UI type (OTHER for types the protocol does not define)."}, []string{"event_type"})
	for _, t := range knownEventTypes {
		m.eventsIn[t] = events.WithLabelValues(t)
	}
	m.eventsInOther = events.WithLabelValues("OTHER")
	w := h.writer
	reg.MustRegister(panics.Collectors()...)
	reg.MustRegister(m.runs, events, m.bytesIn, m.eventsOut, m.bytesOut, m.clientsDropped, m.attached, m.resumes, m.prelude,
		m.threadsDeleted, m.threadsListed, m.hydrated, m.irregular, m.nonSSEFrames, m.nonSSEBytes,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "active_runs", Help: "Runs this process is pumping."},
			func() float64 { return float64(h.runs.live.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "recorder_queue_depth", Help: "Events waiting to be stored."},
			func() float64 { return float64(w.Stats().Queued) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "recorder_queue_high_water", Help: "Largest recorder queue depth seen."},
			func() float64 { return float64(w.Stats().HighWater) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "recorder_queue_bytes", Help: "Bytes of the events waiting to be stored (bounded by AGUI_RECORDER_BUFFER_BYTES)."},
			func() float64 { return float64(w.Stats().QueuedBytes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "recorder_queue_high_water_bytes", Help: "Largest recorder queue size in bytes seen."},
			func() float64 { return float64(w.Stats().HighWaterBytes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ns, Name: "recorder_events_total", Help: "Events stored."},
			func() float64 { return float64(w.Stats().Appended) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ns, Name: "recorder_batches_total", Help: "Successful batched writes (one store round trip each)."},
			func() float64 { return float64(w.Stats().Batches) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ns, Name: "recorder_round_trips_total", Help: "Store calls made by the recorder, failed ones included."},
			func() float64 { return float64(w.Stats().RoundTrips) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ns, Name: "recorder_store_errors_total", Help: "Store calls that failed (Redis errors, timeouts)."},
			func() float64 { return float64(w.Stats().StoreErrors) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ns, Name: "recorder_dropped_events_total", Help: "Events dropped because the recorder buffer stayed full while the store made no progress (the run is marked with a gap)."},
			func() float64 { return float64(w.Stats().Dropped) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ns, Name: "recorder_backpressure_waits_total", Help: "Events that found the recorder buffer full and waited for room (their run was slowed to the store's pace)."},
			func() float64 { return float64(w.Stats().Waits) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ns, Name: "recorder_write_seconds_total", Help: "Summed latency of successful batched writes."},
			func() float64 { return w.Stats().BatchLatency.Seconds() }),
		branchesBuilt(ns, "folded", func() uint64 { f, _ := h.threads.BranchStats(); return f }),
		branchesBuilt(ns, "compacted", func() uint64 { _, c := h.threads.BranchStats(); return c }),
	)
	return m
}

// branchesBuilt is one series of checkpoint_branches_total (thread.Service.BranchStats).
func branchesBuilt(ns, how string, count func() uint64) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ns, Name: "checkpoint_branches_total",
		Help:        "Branches built for runs' checkpoints: how=folded fed the run to the fold kept with its parent's branch (costs the run), how=compacted compacted the whole branch.",
		ConstLabels: prometheus.Labels{"how": how}},
		func() float64 { return float64(count()) })
}

func (m *metrics) eventIn(typ string, n int) {
	if m == nil {
		return
	}
	if c, ok := m.eventsIn[typ]; ok {
		c.Inc()
	} else {
		m.eventsInOther.Inc()
	}
	m.bytesIn.Add(float64(n))
}

func (m *metrics) irregularEvent(kind string) {
	if m != nil {
		m.irregular.WithLabelValues(kind).Inc()
	}
}

// nonSSE counts a frame of n bytes holding lines that are not SSE.
func (m *metrics) nonSSE(n int) {
	if m == nil {
		return
	}
	m.nonSSEFrames.Inc()
	m.nonSSEBytes.Add(float64(n))
}

func (m *metrics) runEnded(outcome string) {
	if m != nil {
		m.runs.WithLabelValues(outcome).Inc()
	}
}

func (m *metrics) delivered(frames, bytes int) {
	if m != nil {
		m.eventsOut.Add(float64(frames))
		m.bytesOut.Add(float64(bytes))
	}
}

func (m *metrics) hydratedRun(messages, state bool) {
	if m == nil {
		return
	}
	if messages {
		m.hydrated.WithLabelValues("messages").Inc()
	}
	if state {
		m.hydrated.WithLabelValues("state").Inc()
	}
}

func (m *metrics) slowClient() {
	if m != nil {
		m.clientsDropped.Inc()
	}
}

// attachMetrics adapts metrics to attach.Metrics.
type attachMetrics struct{ m *metrics }

func (a attachMetrics) StreamStarted(kind string) { a.m.attached.WithLabelValues(kind).Inc() }
func (a attachMetrics) StreamEnded(kind string)   { a.m.attached.WithLabelValues(kind).Dec() }
func (a attachMetrics) Resumed(exact bool) {
	if exact {
		a.m.resumes.WithLabelValues("exact").Inc()
	} else {
		a.m.resumes.WithLabelValues("full_history").Inc()
	}
}
func (a attachMetrics) ThreadDeleted()      { a.m.threadsDeleted.Inc() }
func (a attachMetrics) ThreadsListed(n int) { a.m.threadsListed.Add(float64(n)) }
func (a attachMetrics) Prelude(kind string, d time.Duration) {
	a.m.prelude.WithLabelValues(kind).Observe(d.Seconds())
}
