package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agui-proxy/agui-proxy/agui"
	"github.com/agui-proxy/agui-proxy/attach"
	"github.com/agui-proxy/agui-proxy/hydrate"
	"github.com/agui-proxy/agui-proxy/inspector"
	"github.com/agui-proxy/agui-proxy/internal/inflight"
	"github.com/agui-proxy/agui-proxy/internal/problem"
	"github.com/agui-proxy/agui-proxy/internal/readahead"
	"github.com/agui-proxy/agui-proxy/keepalive"
	"github.com/agui-proxy/agui-proxy/panics"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/thread"
)

// Handler is the AG-UI proxy: an http.Handler that forwards every request to the upstream
// agent, and records, enriches and fans out the event stream of every run. Create it with New;
// stop it with Shutdown. It is safe for concurrent use.
type Handler struct {
	cfg      Config
	log      *slog.Logger
	store    recorder.Store
	ownStore bool
	writer   *recorder.Writer
	rp       *httputil.ReverseProxy
	runRP    *httputil.ReverseProxy // rp for runs: small copy buffers (an event stream is written by its subscription)
	runs     registry
	threads  *thread.Service
	attach   *attach.Handler
	ui       http.Handler // the inspector page, nil when off
	metrics  *metrics
	leaser   recorder.Leaser   // nil when the store keeps no leases
	done     chan struct{}     // closed by Shutdown: stops the lease and checkpoint loops
	ckpts    chan recorder.Run // ended runs waiting for their checkpoint (see checkpoints)
	loops    sync.WaitGroup
	streams  inflight.Counter // the client connections taken over (run.direct) until closed
	draining atomic.Bool
	shutOnce sync.Once
	shutErr  error

	// retainLeft is what is left of cfg.CheckpointMemory for the runs' kept events (run.retain).
	retainLeft atomic.Int64
}

// New returns a Handler for cfg. Errors wrap ErrInvalidConfig.
func New(cfg Config) (*Handler, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	h := &Handler{cfg: cfg, log: cfg.Logger, store: cfg.Store}
	h.retainLeft.Store(max(cfg.CheckpointMemory, 0))
	if h.store == nil {
		h.store = recorder.NewMemoryStore(recorder.MemoryConfig{})
		h.ownStore = true
	}
	var lease *recorder.WriterLease
	if _, ok := h.store.(recorder.Leaser); ok {
		// A run that streams has its lease renewed by its appends (on a store that can), so
		// the lease loop renews only the quiet ones (renewAll); a stop request reaches the run
		// with its next append instead of the next renewal.
		lease = &recorder.WriterLease{Node: cfg.Node, TTL: leaseTTL(cfg.LeaseInterval), OnStop: func(run recorder.Run) {
			if rn := h.runs.get(run.ThreadID, run.RunID); rn != nil {
				rn.cancel(thread.ErrStopped)
			}
		}}
	}
	h.writer = recorder.NewWriter(recorder.WriterConfig{
		Store:             h.store,
		Durability:        cfg.Durability,
		MaxBufferedEvents: cfg.RecorderBuffer,
		MaxBufferedBytes:  cfg.RecorderBufferBytes,
		FullWait:          cfg.RecorderFullWait,
		Linger:            recorderLinger(cfg.RecorderLinger, recorder.DefaultLinger),
		BusyLinger:        recorderLinger(cfg.RecorderBusyLinger, recorder.DefaultBusyLinger),
		Lanes:             recorderLanes(cfg.RecorderLanes, cfg.Store),
		Lease:             lease,
		Logger:            cfg.Logger,
	})
	transport := cfg.Transport
	if transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.ResponseHeaderTimeout = cfg.UpstreamHeaderTimeout
		t.MaxIdleConns = 1024
		t.MaxIdleConnsPerHost = 256
		// Each upstream connection holds its buffers for a stream's whole life: 1 KiB each
		// instead of 4 (a run's events are read through the sse.Reader's own buffer; larger
		// reads and writes bypass these). An agent that streams faster than it is read gets
		// larger reads anyway: the connection reads ahead, into a buffer it holds only while
		// the burst lasts (readahead.Conn).
		t.ReadBufferSize, t.WriteBufferSize = 1<<10, 1<<10
		dial := t.DialContext
		t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return readahead.New(c), nil
		}
		transport = t
	}
	h.rp = &httputil.ReverseProxy{
		Rewrite:        h.rewrite,
		Transport:      transport,
		ModifyResponse: h.modifyResponse,
		ErrorHandler:   h.errorHandler,
		ErrorLog:       slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
		BufferPool:     bufferPool{},
	}
	runRP := *h.rp
	runRP.BufferPool = smallBufferPool{}
	h.runRP = &runRP
	h.metrics = newMetrics(cfg.Registerer, h)
	var am attach.Metrics
	if h.metrics != nil {
		am = attachMetrics{h.metrics}
	}
	h.threads, err = thread.New(thread.Config{
		Store:               h.store,
		Logger:              cfg.Logger,
		Route:               cfg.Route,
		IdentityHeader:      cfg.IdentityHeader,
		TrustedProxies:      cfg.TrustedProxies,
		Compact:             cfg.Compact,
		LeaseGrace:          cfg.LeaseInterval,
		AllowConcurrentRuns: cfg.AllowConcurrentRuns,
	})
	if err == nil {
		h.attach, err = attach.New(attach.Config{
			Threads:           h.threads,
			Metrics:           am,
			Logger:            cfg.Logger,
			Prefix:            cfg.AttachPrefix,
			HeartbeatInterval: cfg.HeartbeatInterval,
			ClientQueueBytes:  cfg.ClientQueueBytes,
			WriteTimeout:      cfg.AttachWriteTimeout,
			TakeOver:          !cfg.StreamKeepAlive,
			Retry:             cfg.AttachRetry,
			FollowPoll:        cfg.AttachFollowPoll,
			MaxImportBytes:    cfg.MaxImportBytes,
			StoreTimeout:      cfg.StoreTimeout,
		})
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if cfg.Inspector {
		h.ui = inspector.Handler(cfg.AttachPrefix)
	}
	h.done = make(chan struct{})
	h.ckpts = make(chan recorder.Run, checkpointQueue)
	h.loops.Add(1)
	go h.checkpoints()
	if l, ok := h.store.(recorder.Leaser); ok {
		h.leaser = l
		h.loops.Add(1)
		go h.renewLeases()
	}
	if cfg.IdentityHeader == "" {
		h.log.Info("no identity header configured: single-tenant mode, every caller can use every thread")
	}
	return h, nil
}

// Store returns the store the handler records into.
func (h *Handler) Store() recorder.Store { return h.store }

// ServeHTTP proxies r. A run (see isRunRequest) is validated, registered, forwarded with a
// context that does not end when the client leaves, and streamed back event by event; every
// other request goes through httputil.ReverseProxy untouched.
//
// The streams (a run's, an attacher's) are written from this small frame, after serve
// returned: a goroutine keeps for a stream's whole life the stack it uses while it waits,
// and serve's and serveRun's frames (kilobytes of locals) would make it 16 KiB instead of 8.
//
// A panic while answering r ends only r (panics.Request, or panics.Attach for the attach
// endpoints): logged once with its stack and counted, it is answered 500 Internal when
// nothing was written yet, else the response is aborted (a stream's client resumes from its
// last event id). A run already pumping is not the request's: it goes on.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	gw := &guardWriter{ResponseWriter: w}
	defer h.recoverRequest(gw, r)
	switch rn, ar := h.serve(gw, r); {
	case rn != nil:
		h.stream(w, rn) // (its headers went through gw: a panic from here on aborts)
	case ar != nil:
		panics.Probe(panics.Attach, r.URL.Path)
		h.attach.ServeHTTP(gw, ar)
	}
}

// recoverRequest is ServeHTTP's deferred containment of a panic (see ServeHTTP).
func (h *Handler) recoverRequest(gw *guardWriter, r *http.Request) {
	where := panics.Request
	if strings.HasPrefix(r.URL.Path, h.cfg.AttachPrefix) {
		where = panics.Attach
	}
	v := recover()
	if v == nil {
		return
	}
	err := panics.Recovered(where, v, h.log, slog.String("method", r.Method), slog.String("path", r.URL.Path))
	if gw.wrote {
		panic(http.ErrAbortHandler) // net/http closes the connection without logging again
	}
	problem.Respond(gw, r.WithContext(context.WithoutCancel(r.Context())), h.log, err)
}

// guardWriter is the http.ResponseWriter of a request the proxy answers: it tells
// recoverRequest whether the response started. Unwrap lets http.ResponseController reach the
// connection underneath (Flush, Hijack, deadlines).
type guardWriter struct {
	http.ResponseWriter
	wrote bool
}

func (g *guardWriter) WriteHeader(code int) {
	if code >= 200 {
		g.wrote = true
	}
	g.ResponseWriter.WriteHeader(code)
}

func (g *guardWriter) Write(b []byte) (int, error) {
	g.wrote = true
	return g.ResponseWriter.Write(b)
}

// Flush sends what was written (httputil.ReverseProxy flushes through http.Flusher).
func (g *guardWriter) Flush() {
	g.wrote = true
	if f, ok := g.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap returns the ResponseWriter underneath, for http.ResponseController.
func (g *guardWriter) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// serve answers r, or returns the run to stream (its upstream answered with an event stream),
// or the attach request to hand to the attach handler (an event stream or the bulk export).
func (h *Handler) serve(w http.ResponseWriter, r *http.Request) (*run, *http.Request) {
	owner, err := h.threads.Identify(r) // once per request: attach and rewrite read it back
	if err != nil {
		h.fail(w, r, err)
		return nil, nil
	}
	if h.cfg.IdentityHeader != "" && owner == "" && !h.cfg.AnonymousPassthrough {
		// Multi-tenant: no request reaches the agent (or the history) without an identity.
		h.fail(w, r, thread.IdentityRequired(h.cfg.IdentityHeader))
		return nil, nil
	}
	r = r.WithContext(thread.WithOwner(r.Context(), owner, nil))
	if strings.HasPrefix(r.URL.Path, h.cfg.AttachPrefix) {
		if inspector.Match(h.cfg.AttachPrefix, r.URL.Path) {
			if h.ui == nil {
				h.fail(w, r, problem.WithDetail(problem.ErrNoSuchEndpoint,
					"the inspector is off: start the proxy with AGUI_INSPECTOR=true (proxy.Config.Inspector) to serve it here"))
				return nil, nil
			}
			h.serveInspector(w, r, owner)
			return nil, nil
		}
		if strings.HasSuffix(r.URL.Path, "/events") || r.URL.Path == h.cfg.AttachPrefix+"export" {
			// Event streams and the bulk export bound their store reads before the first
			// byte, and each read of the export, themselves (attach.Config.StoreTimeout), not
			// the stream. They are written from ServeHTTP's frame.
			return nil, r
		}
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/import") {
			// An import bounds each of its store calls (attach.ImportThreadBounded): its
			// deadline grows with the document.
			h.attach.ServeHTTP(w, r)
			return nil, nil
		}
		// History, runs and stop answer once the store did: bound the wait (503
		// StoreUnavailable after StoreTimeout).
		ctx, cancel := context.WithTimeoutCause(r.Context(), h.cfg.StoreTimeout, problem.ErrStoreTimeout)
		defer cancel()
		h.attach.ServeHTTP(w, r.WithContext(ctx))
		return nil, nil
	}
	if !isRunCandidate(r) {
		h.rp.ServeHTTP(w, r)
		return nil, nil
	}
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(h.cfg.BodyReadTimeout))
	if !acceptsEventStream(r) && !isJSONType(r.Header.Get("Content-Type")) {
		// Labelled otherwise (a form, text, nothing): a body that does not start as a JSON
		// object is no run, and goes to the agent unread, however large.
		prefix, object, err := sniffObject(r.Body)
		if !object && err == nil {
			rc.SetReadDeadline(time.Time{})
			r.Body = prefixedBody{Reader: io.MultiReader(bytes.NewReader(prefix), r.Body), Closer: r.Body}
			h.rp.ServeHTTP(w, r)
			return nil, nil
		}
		r.Body = prefixedBody{Reader: io.MultiReader(bytes.NewReader(prefix), r.Body), Closer: r.Body}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes))
	r.Body.Close()
	rc.SetReadDeadline(time.Time{})
	if err != nil {
		var mbe *http.MaxBytesError
		var ne net.Error
		switch {
		case errors.As(err, &mbe):
		case errors.As(err, &ne) && ne.Timeout():
			// The read deadline also cancels the request's context (so Respond would take
			// the client for gone), but the connection can still carry the answer.
			w.Header().Set("Connection", "close")
			err = fmt.Errorf("%w: %v", problem.ErrBodyTimeout, h.cfg.BodyReadTimeout)
			problem.Respond(w, r.WithContext(context.WithoutCancel(r.Context())), h.log, err)
			return nil, nil
		default:
			err = fmt.Errorf("%w: reading the body: %v", agui.ErrInvalidRunInput, err)
		}
		h.fail(w, r, err)
		return nil, nil
	}
	if !acceptsEventStream(r) && !agui.LooksLikeRunInput(body) {
		// A POST that is not a run: forward the buffered copy untouched.
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.rp.ServeHTTP(w, r)
		return nil, nil
	}
	in, err := agui.DecodeRunInput(body)
	if err != nil {
		h.fail(w, r, err)
		return nil, nil
	}
	if err := h.threads.Caller(owner); err != nil {
		h.fail(w, r, err)
		return nil, nil
	}
	if h.draining.Load() {
		h.fail(w, r, problem.ErrShuttingDown)
		return nil, nil
	}
	return h.serveRun(w, r, in, owner), nil
}

// isRunCandidate reports whether r may start a run: a POST that asks for an event stream (the
// official HttpAgent always sends Accept: text/event-stream) or whose body may be JSON however
// it is labelled: application/json (or a +json type), no Content-Type, or one of the defaults
// that clients put on a body they were not told the type of (curl -d sends
// application/x-www-form-urlencoded, fetch with a string text/plain). Such a body, when it
// starts as a JSON object (serve sniffs its first byte; any other goes to the agent unread,
// however large), is read (at most MaxBodyBytes) and is a run when it has top-level threadId
// and runId, so that a run is never streamed unrecorded because of its label. Other POSTs
// (multipart uploads, binary types) are proxied unread.
func isRunCandidate(r *http.Request) bool {
	if r.Method != http.MethodPost {
		return false
	}
	if acceptsEventStream(r) {
		return true
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return true
	}
	mt, _, _ := mime.ParseMediaType(ct)
	switch mt {
	case "application/json", "application/x-www-form-urlencoded", "text/plain":
		return true
	}
	return strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}

// isJSONType reports whether the Content-Type ct is application/json or a +json type.
func isJSONType(ct string) bool {
	mt, _, _ := mime.ParseMediaType(ct)
	return mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}

// sniffObject reads body until its first byte that is not JSON white space, and reports
// whether that byte opens an object. It returns what it read, to be sent on with the rest. A
// body of white space only (or more than 4 KiB of it) is not an object.
func sniffObject(body io.Reader) ([]byte, bool, error) {
	var prefix []byte
	buf := make([]byte, 512)
	for len(prefix) < 4<<10 {
		n, err := body.Read(buf)
		prefix = append(prefix, buf[:n]...)
		if i := bytes.IndexFunc(buf[:n], func(r rune) bool { return r != ' ' && r != '\t' && r != '\r' && r != '\n' }); i >= 0 {
			return prefix, buf[i] == '{', nil
		}
		if err == io.EOF {
			return prefix, false, nil
		}
		if err != nil {
			return prefix, false, err
		}
	}
	return prefix, false, nil
}

// prefixedBody is a request body whose first bytes were read already (sniffObject).
type prefixedBody struct {
	io.Reader
	io.Closer
}

func acceptsEventStream(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			if isEventStreamType(strings.TrimSpace(part)) {
				return true
			}
		}
	}
	return false
}

func isEventStream(h http.Header) bool { return isEventStreamType(h.Get("Content-Type")) }

// isEventStreamType reports whether the media type v (with its parameters) is
// text/event-stream. The usual spellings ("text/event-stream", with "; charset=utf-8") are
// recognised without mime.ParseMediaType, which allocates a map of the parameters.
func isEventStreamType(v string) bool {
	const sse = "text/event-stream"
	if len(v) >= len(sse) && strings.EqualFold(v[:len(sse)], sse) {
		rest := v[len(sse):]
		if rest == "" {
			return true
		}
		if rest[0] != ';' && rest[0] != ' ' && rest[0] != '\t' {
			return false // text/event-streamx, a longer type
		}
	}
	mt, _, _ := mime.ParseMediaType(v)
	return mt == sse
}

type runCtxKey struct{}

func runFrom(ctx context.Context) *run {
	rn, _ := ctx.Value(runCtxKey{}).(*run)
	return rn
}

// serveRun registers the run and forwards it; it returns the run when the upstream answered
// with an event stream (ServeHTTP streams it back), else nil once the answer was written.
// Before the agent is called it costs the run's creation (one store round trip, every rule
// checked atomically there, see thread.Service.StartRun) and the message ids of the branch it
// continues: nothing more when this process built that branch (found by the parent's epoch the
// creation answered), else one small read.
func (h *Handler) serveRun(w http.ResponseWriter, r *http.Request, in *agui.RunInput, owner string) *run {
	ctx := r.Context()
	// The run's creation is bounded by StoreTimeout like every other store wait: a store that
	// does not answer gets the client a 503 StoreUnavailable problem at once. A creation still
	// queued when the deadline passes is never sent (recorder's coalescer drops it). One already
	// sent that the store carries out later leaves a run nobody pumps: it is handled as the run
	// of a replica that died right after creating it (its lease expires, the thread is free
	// again, and the run is ended INTERRUPTED when read; see thread.Service.ReapOrphan). Its
	// run id stays taken: a client retries with a new one, as @ag-ui/client does per run.
	cctx, ccancel := context.WithTimeoutCause(ctx, h.cfg.StoreTimeout, problem.ErrStoreTimeout)
	meta, err := h.threads.StartRun(cctx, recorder.Run{
		ThreadID: in.ThreadID, RunID: in.RunID, ParentRunID: in.ParentRunID, Owner: owner, Title: agui.Title(in.Messages),
		Node: h.cfg.Node, LeaseUntil: time.Now().Add(leaseTTL(h.cfg.LeaseInterval)),
	})
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(cctx), problem.ErrStoreTimeout) {
		err = fmt.Errorf("%w: creating the run: %w", problem.ErrStoreUnavailable, problem.ErrStoreTimeout)
	}
	ccancel()
	if err != nil {
		if lastID := r.Header.Get("Last-Event-ID"); lastID != "" && errors.Is(err, recorder.ErrRunAlreadyStarted) {
			// A client re-sending a run it already started, with the last event it saw: resume
			// it (the agent is not called again).
			h.attach.ServeResume(w, r, in.ThreadID, in.RunID, lastID)
			return nil
		}
		if in.ParentRunID != "" && errors.Is(err, recorder.ErrRunNotFound) {
			err = problem.WithDetail(err, fmt.Sprintf("parentRunId %q is not a run of thread %q: leave parentRunId out to continue the thread's latest run, or take a runId from GET %sthreads/%s/runs",
				in.ParentRunID, in.ThreadID, h.cfg.AttachPrefix, in.ThreadID))
		}
		h.fail(w, r, err)
		return nil
	}
	rec, err := h.writer.Open(meta) // (StartRun checked the ids; Open checks the epoch too)
	if err != nil {
		h.release(ctx, meta)
		h.fail(w, r, err)
		return nil
	}
	parent := meta.ParentRunID
	sctx, scancel := context.WithTimeoutCause(ctx, h.cfg.StoreTimeout, problem.ErrStoreTimeout)
	defer scancel()
	sent := in.IDs()
	known, err := h.threads.KnownMessageIDs(sctx, meta.ThreadID, parent, meta.ParentEpoch, sent)
	if err != nil {
		h.log.LogAttrs(ctx, slog.LevelWarn, "could not read the thread history; RUN_STARTED.input keeps every message",
			slog.String("thread_id", in.ThreadID), slog.String("run_id", in.RunID), slog.Any("err", err))
	}

	var fwd *agui.RunInput
	err = panics.Call(panics.Hydrate, h.log, func() (err error) {
		fwd, err = h.hydrate(sctx, in, meta.ThreadID, parent, meta.ParentEpoch, known)
		return err
	}, slog.String("thread_id", meta.ThreadID), slog.String("run_id", meta.RunID))
	if err != nil {
		h.release(ctx, meta)
		h.fail(w, r, err)
		return nil
	}

	base, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	runCtx, stopTimer := context.WithTimeoutCause(base, h.cfg.MaxRunDuration, errRunTimeout)
	rn := &run{
		h: h, meta: meta, rec: rec, input: fwd, parent: parent, inputJSON: normalizedInput(in, known),
		retainOff: h.cfg.CheckpointMemory <= 0 || !h.checkpointsAtEnd(), // nothing would use them
		cancel:    func(cause error) { cancel(cause); stopTimer() },
		done:      make(chan struct{}),
	}
	rn.ctx = context.WithValue(runCtx, runCtxKey{}, rn)
	rn.clientCtx = ctx
	rn.direct = !h.cfg.StreamKeepAlive && r.ProtoMajor == 1 && r.ProtoMinor >= 1
	if rn.direct {
		rn.keepAlive = keepalive.For(r)
	}
	h.runs.add(rn)

	r = r.WithContext(context.WithValue(ctx, runCtxKey{}, rn))
	r.Body = io.NopCloser(bytes.NewReader(fwd.Body))
	r.ContentLength = int64(len(fwd.Body))
	if rn.direct {
		// ReverseProxy's request to the agent keeps, for the run's life, a trace hook that
		// holds the writer it was given (for 1xx answers); handed w itself, it would keep
		// net/http's connection and its buffers alive after the connection is taken over.
		dw := &detachableWriter{w: w}
		h.runRP.ServeHTTP(dw, r)
		dw.w = nil
	} else {
		h.runRP.ServeHTTP(w, r)
	}

	if rn.pumping.Load() {
		return rn // ReverseProxy wrote the headers and an empty body and is done with w
	}
	// The upstream failed or did not answer with an event stream: the run id was not used.
	rn.cancel(errRunAbandoned)
	h.runs.remove(rn)
	h.release(ctx, meta)
	return nil
}

// stream writes the run's events from its subscription straight to the client. A direct run
// takes the client's connection over and returns at once: the events are written by the pump
// (live.Subscriber.ServeConn).
func (h *Handler) stream(w http.ResponseWriter, rn *run) {
	if rn.direct {
		// Hijack sends the headers (chunked transfer coding; Connection: close unless the
		// connection goes back to the server at the end) first.
		if conn, brw, err := http.NewResponseController(w).Hijack(); err == nil {
			h.streams.Add()
			ka := rn.keepAlive.Hijacked(brw)
			rn.sub.ServeConn(conn, func(kept net.Conn) {
				if kept != nil {
					ka.Return(kept) // (it closes what it cannot keep, and nil keeps none)
				}
				h.streams.Done()
			})
			return
		}
		// Not hijackable (a wrapper that hides it): net/http writes it, then closes.
	}
	err := http.NewResponseController(w).Flush() // the headers, at once
	if err == nil {
		err = rn.sub.WriteTo(w, nil)
	}
	rn.sub.Close()
	if err != nil && !errors.Is(err, io.EOF) {
		// Like ReverseProxy on a copy error: abort, so the client sees a broken stream
		// (and resumes from its last event id), not a clean end.
		panic(http.ErrAbortHandler)
	}
}

// release deletes a registered run that was never started, so its id can be used again.
func (h *Handler) release(ctx context.Context, meta recorder.Run) {
	if err := h.store.DeleteRun(context.WithoutCancel(ctx), meta.ThreadID, meta.RunID); err != nil {
		h.log.LogAttrs(ctx, slog.LevelWarn, "could not release an unused run id",
			slog.String("thread_id", meta.ThreadID), slog.String("run_id", meta.RunID), slog.Any("err", err))
	}
}

// hydrate returns the input to forward to the agent: in itself, or a copy whose body holds
// the stored branch (of thread key, through parent) messages and state (Config.Hydrate, package hydrate). In the default
// mode the branch is read only when the request lacks a message the branch holds (known: the
// branch's message ids; nil when they could not be read), so a client that sends the whole
// conversation costs nothing more. A parent still running (concurrent runs) is not hydrated
// from: its conversation is not settled. A branch with events missing in the store refuses the run
// (problem.ErrHistoryIncomplete) rather than send the agent a shortened conversation.
func (h *Handler) hydrate(ctx context.Context, in *agui.RunInput, key, parent, parentEpoch string, known map[string]bool) (*agui.RunInput, error) {
	mode := h.cfg.Hydrate
	if mode == hydrate.ModeOff || parent == "" {
		return in, nil
	}
	if mode == hydrate.ModeMissing && known != nil && !lacksKnown(in, known) {
		return in, nil
	}
	panics.Probe(panics.Hydrate, key)
	branch, ended, err := h.threads.BranchInput(ctx, key, parent, parentEpoch)
	if err != nil {
		return nil, err
	}
	if !ended {
		return in, nil // the parent is still running (concurrent runs): nothing settled to add
	}
	res, err := hydrate.Apply(mode, in, branch)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", problem.ErrHistoryIncomplete, err)
	}
	if !res.Changed() {
		return in, nil
	}
	h.metrics.hydratedRun(res.Messages, res.State)
	h.log.LogAttrs(ctx, slog.LevelDebug, "hydrated a run request from the stored branch",
		slog.String("thread_id", in.ThreadID), slog.String("run_id", in.RunID), slog.Int("restored_messages", res.Restored), slog.Bool("state", res.State))
	fwd := *in
	fwd.Body = res.Body
	return &fwd, nil
}

// lacksKnown reports whether a held message id is missing from the request's messages.
func lacksKnown(in *agui.RunInput, known map[string]bool) bool {
	if len(known) > len(in.Messages) {
		return true
	}
	sent := make(map[string]bool, len(in.Messages))
	for _, id := range in.IDs() {
		sent[id] = true
	}
	for id := range known {
		if !sent[id] {
			return true
		}
	}
	return false
}

// rewrite builds the upstream request. For runs, the outbound request gets the run's own
// context, so a client that disconnects does not cancel the agent's run, and asks for an
// uncompressed stream, so the proxy can parse it.
func (h *Handler) rewrite(pr *httputil.ProxyRequest) {
	pr.SetURL(h.cfg.Upstream)
	pr.SetXForwarded()
	if name := h.cfg.IdentityHeader; name != "" {
		// Set after hop-by-hop removal: a client naming the header in Connection cannot strip
		// or replace the identity the agent receives.
		pr.Out.Header.Del(name)
		if owner, _ := h.threads.Owner(pr.In); owner != "" {
			pr.Out.Header.Set(name, owner)
		}
	}
	if rn := runFrom(pr.In.Context()); rn != nil {
		pr.Out = pr.Out.WithContext(rn.ctx)
		// Our own body reader, not the ReverseProxy's wrapper of the inbound one: the stdlib
		// marks its wrapper closed when ServeHTTP returns (as it does when the client leaves),
		// and the Transport's last EOF-check Read of a request body still being written then
		// fails and closes the upstream connection, killing the run (golang/go#46866 guard).
		body := rn.input.Body
		pr.Out.Body = io.NopCloser(bytes.NewReader(body))
		pr.Out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		pr.Out.ContentLength = int64(len(body))
		pr.Out.Header.Del("Accept-Encoding")
		pr.Out.Header.Del("Last-Event-ID")
	}
}

// modifyResponse starts the run's pump when the upstream answers with an event stream and
// hands the client a subscription in place of the upstream body.
func (h *Handler) modifyResponse(res *http.Response) error {
	rn := runFrom(res.Request.Context())
	if rn == nil {
		if res.Request.Method == http.MethodPost && isEventStream(res.Header) {
			// A stream the proxy cannot record: say so, once per request, rather than let the
			// caller find the thread missing later.
			h.log.LogAttrs(res.Request.Context(), slog.LevelWarn,
				"a POST was answered with an event stream but is not a run (its body is not a JSON object with threadId and runId): passed through, not recorded",
				slog.String("path", res.Request.URL.Path), slog.String("content_type", res.Request.Header.Get("Content-Type")))
		}
		return nil
	}
	if res.StatusCode < 200 || res.StatusCode > 299 || !isEventStream(res.Header) {
		h.log.LogAttrs(rn.ctx, slog.LevelInfo, "the agent did not answer the run with an event stream; passed through, not recorded",
			slog.String("thread_id", rn.meta.ThreadID), slog.String("run_id", rn.meta.RunID),
			slog.Int("status", res.StatusCode), slog.String("content_type", res.Header.Get("Content-Type")))
		return nil
	}
	rn.pumping.Store(true)
	rn.hub, rn.release = h.threads.Pumping(rn.meta.ThreadID, rn.meta.RunID, func() { rn.cancel(thread.ErrStopped) })
	var clientGone <-chan struct{}
	if in := inboundFrom(res.Request); in != nil {
		clientGone = in.Done()
	}
	opts := h.clientOptions(clientGone)
	if rn.direct {
		opts.WriteTimeout = h.cfg.AttachWriteTimeout // (only once the client lags)
		if rn.keepAlive == nil {
			res.Header.Set("Connection", "close") // its connection is taken over (stream), then closed
		}
	}
	rn.sub = rn.start(res.Body, opts)
	res.Body = http.NoBody // the stream is written by serveRun from rn.sub
	res.ContentLength = -1
	res.Header.Del("Content-Length")
	res.Header.Set("Cache-Control", "no-cache")
	res.Header.Set("X-Accel-Buffering", "no")
	res.Header.Set("X-Agui-Thread-Id", recorder.ThreadIDOf(rn.meta.ThreadID))
	res.Header.Set("X-Agui-Run-Id", rn.meta.RunID)
	return nil
}

// inboundFrom returns the client's request context for an outbound request. The outbound
// context is the run's own, so the client's is carried on the run.
func inboundFrom(out *http.Request) context.Context {
	if rn := runFrom(out.Context()); rn != nil {
		return rn.clientCtx
	}
	return nil
}

// errorHandler answers upstream failures before the response started.
func (h *Handler) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	h.fail(w, r, problem.Upstream(err))
}

// fail writes the problem for err and logs it once.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	problem.Respond(w, r, h.log, err)
}

// renewLeases keeps the leases of this process's runs fresh, and stops the runs another
// replica asked to stop. It runs until Shutdown.
func (h *Handler) renewLeases() {
	defer h.loops.Done()
	t := time.NewTicker(h.cfg.LeaseInterval)
	defer t.Stop()
	for {
		select {
		case <-h.done:
			return
		case <-t.C:
		}
		h.renewAll(time.Now())
	}
}

// leaseTTL is how long a renewed lease lasts: three renewal intervals, so that a renewal or
// two may fail (or find the store slow) before another replica may take the run for orphaned.
func leaseTTL(interval time.Duration) time.Duration { return 3 * interval }

// leaseRenewers bounds the lease renewals in flight at once: a store that coalesces calls
// (Redis) sends them in a few pipelines, so thousands of runs are renewed in a few round
// trips instead of one after the other.
const leaseRenewers = 64

// renewAll renews, as of now, the lease of every live run that no append renewed within the
// last interval (recorder.WriterLease: a streaming run's appends hold its lease, until at
// least two intervals from now), leaseRenewers at a time, and stops the runs another replica
// asked to stop. It returns when every renewal has ended.
func (h *Handler) renewAll(now time.Time) {
	until := now.Add(leaseTTL(h.cfg.LeaseInterval))
	since := now.Add(-h.cfg.LeaseInterval)
	runs := slices.DeleteFunc(h.runs.list(), func(rn *run) bool {
		return rn.rec.LeasedSince(since)
	})
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.LeaseInterval)
	defer cancel()
	if bl, ok := h.leaser.(recorder.BatchLeaser); ok {
		h.renewBatch(ctx, bl, runs, until)
		return
	}
	next := make(chan *run)
	var wg sync.WaitGroup
	for range min(leaseRenewers, len(runs)) {
		wg.Go(func() {
			for rn := range next {
				stop, err := h.leaser.RenewLease(ctx, rn.meta.ThreadID, rn.meta.RunID, h.cfg.Node, until)
				if err != nil {
					h.log.LogAttrs(ctx, slog.LevelWarn, "could not renew a run lease",
						slog.String("thread_id", rn.meta.ThreadID), slog.String("run_id", rn.meta.RunID), slog.Any("err", err))
					continue
				}
				if stop {
					rn.cancel(thread.ErrStopped)
				}
			}
		})
	}
	for _, rn := range runs {
		next <- rn
	}
	close(next)
	wg.Wait()
}

// renewBatch is renewAll on a store that renews many leases per round trip: one call for
// every live run (Redis: a few script calls in one pipeline, where one call per run cost
// more Redis CPU than the events of a run streaming one per second).
func (h *Handler) renewBatch(ctx context.Context, bl recorder.BatchLeaser, runs []*run, until time.Time) {
	if len(runs) == 0 {
		return
	}
	refs := make([]recorder.RunRef, len(runs))
	for i, rn := range runs {
		refs[i] = recorder.RunRef{ThreadID: rn.meta.ThreadID, RunID: rn.meta.RunID}
	}
	outcomes, err := bl.RenewLeases(ctx, h.cfg.Node, until, refs)
	if err != nil {
		h.log.LogAttrs(ctx, slog.LevelWarn, "could not renew the run leases", slog.Int("runs", len(runs)), slog.Any("err", err))
		return
	}
	for i, o := range outcomes {
		switch o {
		case recorder.LeaseStop:
			runs[i].cancel(thread.ErrStopped)
		case recorder.LeaseNoRun:
			h.log.LogAttrs(ctx, slog.LevelWarn, "could not renew a run lease",
				slog.String("thread_id", runs[i].meta.ThreadID), slog.String("run_id", runs[i].meta.RunID), slog.Any("err", recorder.ErrRunNotFound))
		}
	}
}

// checkpointQueue bounds the ended runs waiting for their checkpoint. A run that finds it full
// gets none now: its checkpoint is rebuilt on demand by the next prelude that needs it.
const checkpointQueue = 4096

// checkpoint queues the ended run for the checkpoint loop, off the pump's path: the pump
// returns at once instead of waiting for the recorder to flush and the branch to be read.
func (h *Handler) checkpoint(meta recorder.Run) {
	if h.cfg.DisableRecording {
		return
	}
	select {
	case h.ckpts <- meta:
	default:
		h.log.LogAttrs(context.Background(), slog.LevelDebug, "checkpoint queue full; built on demand later",
			slog.String("thread_id", meta.ThreadID), slog.String("run_id", meta.RunID))
	}
}

// checkpointNow stores the checkpoint of a run whose end the store just recorded, before its
// terminal event is published: a client starts its next run as soon as it read that event,
// and the run start then learns the messages the thread holds from this checkpoint (one small
// read, thread.Service.KnownMessageIDs) instead of computing the branch itself. meta carries
// the status the run ended with, and kept what the run kept of its events (run.retain; nil
// when it kept none): thread.Service.CheckpointEnded reads back neither the run's metadata and
// checkpoint nor, given its events, those. It reports whether the checkpoint was stored;
// when not (the store is slow or failing, ctx ended), the run is queued for the checkpoint
// loop as before.
func (h *Handler) checkpointNow(ctx context.Context, meta recorder.Run, kept *thread.KeptEvents) bool {
	if !h.checkpointsAtEnd() {
		return false
	}
	err := panics.Call(panics.Checkpoint, h.log, func() error {
		panics.Probe(panics.Checkpoint, meta.ThreadID)
		return h.threads.CheckpointEnded(ctx, meta, kept)
	}, slog.String("thread_id", meta.ThreadID), slog.String("run_id", meta.RunID))
	if err != nil {
		h.log.LogAttrs(ctx, slog.LevelDebug, "no checkpoint before the terminal event; queued", slog.String("thread_id", meta.ThreadID),
			slog.String("run_id", meta.RunID), slog.Any("err", err))
		return false
	}
	return true
}

// checkpointsAtEnd reports whether a run's checkpoint is stored when it ends (checkpointNow),
// and so whether runs keep their events for it. Not without recording, and not on the disk
// store: there a checkpoint is two transactions, each synced to disk, one of them rewriting
// the segment (hundreds of KB on a long thread), and the terminal event is not held for
// them. The loop writes it, and a run start that comes first computes the branch from local
// reads (its grandparent's branch is in memory: thread.Service's recent branches).
func (h *Handler) checkpointsAtEnd() bool {
	_, disk := h.store.(*recorder.DiskStore)
	return !h.cfg.DisableRecording && !disk
}

// checkpoints stores the compacted branch of ended runs so the next prelude is cheap. It takes
// every run queued, waits (bounded) once for their events to be stored, then builds each
// checkpoint. It runs until Shutdown; runs still queued then get theirs on demand.
func (h *Handler) checkpoints() {
	defer h.loops.Done()
	base, stop := context.WithCancel(context.Background()) // cancelled by Shutdown
	defer stop()
	go func() {
		select {
		case <-h.done:
			stop()
		case <-base.Done():
		}
	}()
	var batch []recorder.Run
	for {
		select {
		case <-h.done:
			return
		case m := <-h.ckpts:
			batch = append(batch[:0], m)
		}
		for more := true; more && len(batch) < checkpointQueue; {
			select {
			case m := <-h.ckpts:
				batch = append(batch, m)
			default:
				more = false
			}
		}
		ctx, cancel := context.WithTimeout(base, 5*time.Second)
		if err := h.writer.Flush(ctx); err != nil {
			cancel()
			continue // the store is behind; the checkpoints are rebuilt on demand later
		}
		cancel()
		for _, meta := range batch {
			select {
			case <-h.done:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(base, 5*time.Second)
			err := panics.Call(panics.Checkpoint, h.log, func() error {
				panics.Probe(panics.Checkpoint, meta.ThreadID)
				return h.threads.Checkpoint(ctx, meta.ThreadID, meta.RunID)
			}, slog.String("thread_id", meta.ThreadID), slog.String("run_id", meta.RunID))
			if err != nil {
				h.log.LogAttrs(ctx, slog.LevelDebug, "no checkpoint for run", slog.String("thread_id", meta.ThreadID),
					slog.String("run_id", meta.RunID), slog.Any("err", err))
			}
			cancel()
		}
	}
}

// ActiveRuns returns the number of runs this handler is pumping.
func (h *Handler) ActiveRuns() int { return int(h.runs.live.Load()) }

// Ready reports whether the handler accepts new runs: not draining, store reachable.
func (h *Handler) Ready(ctx context.Context) error {
	if h.draining.Load() {
		return problem.ErrShuttingDown
	}
	return h.store.Ping(ctx)
}

// Shutdown stops accepting runs (503 ShuttingDown), lets the runs in flight go on until ctx is
// done, then cancels the rest (they end with RUN_ERROR code INTERRUPTED, recorded), stops the
// shared followers and thread watches that feed attachers of runs pumped elsewhere (their
// streams end; the clients resume on another replica), flushes the recorder and closes the
// store if the handler created it. It returns ctx's error if runs had
// to be cancelled. Call it after (or while) http.Server.Shutdown stops new connections.
func (h *Handler) Shutdown(ctx context.Context) error {
	h.shutOnce.Do(func() {
		h.draining.Store(true)
		if err := h.runs.pumps.Wait(ctx); err != nil {
			h.shutErr = err
			h.runs.cancelAll(errInterrupted)
			h.runs.pumps.Wait(context.Background())
		}
		close(h.done)
		h.loops.Wait()
		// The client connections taken over (run.direct) are written to their end and closed:
		// their runs have ended, a lagging client gets the rest of its queue (each write
		// bounded by AttachWriteTimeout).
		h.waitBounded(ctx, h.streams.Wait, "client streams")
		h.threads.Close() // the shared followers and thread watches of attachers
		// The attach streams that took their connection over end with their runs, and the
		// thread follows with h.threads.Close.
		h.waitBounded(ctx, h.attach.Wait, "attach streams")
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := h.writer.Shutdown(flushCtx); err != nil {
			h.log.Error("recorder did not flush every event before shutdown", slog.Any("err", err))
			h.shutErr = errors.Join(h.shutErr, err)
		}
		if h.ownStore {
			h.store.Close()
		}
	})
	return h.shutErr
}

// bufferPool gives httputil.ReverseProxy 32 KiB copy buffers from a sync.Pool.
type bufferPool struct{}

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufferPool) Get() []byte  { return *copyBuffers.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { copyBuffers.Put(&b) }

// serveInspector serves the inspector page; in multi-tenant mode only to identified callers,
// like every attach endpoint.
func (h *Handler) serveInspector(w http.ResponseWriter, r *http.Request, owner string) {
	if h.cfg.IdentityHeader != "" && owner == "" {
		h.fail(w, r, thread.IdentityRequired(h.cfg.IdentityHeader))
		return
	}
	h.ui.ServeHTTP(w, r)
}

// smallBufferPool gives the run proxy 1 KiB copy buffers. ReverseProxy holds its buffer for a
// response's whole life; a run's event stream never passes through it (its subscription
// writes to the client directly), only an upstream that did not answer with a stream does.
type smallBufferPool struct{}

var smallCopyBuffers = sync.Pool{New: func() any { b := make([]byte, 1<<10); return &b }}

func (smallBufferPool) Get() []byte  { return *smallCopyBuffers.Get().(*[]byte) }
func (smallBufferPool) Put(b []byte) { smallCopyBuffers.Put(&b) }

var _ http.Handler = (*Handler)(nil)

// recorderLanes is Config.RecorderLanes, or when zero the store's default: recorder.DefaultLanes,
// but one on the disk store, whose transactions are serialized (bbolt) and where more lanes
// only make each batch, and so each transaction and fsync, smaller: 2,000 streams at 20 ms
// (scripts/loadtest.sh chat) had a p50 of 42 s with four lanes against 26 s with one.
func recorderLanes(n int, store recorder.Store) int {
	if n > 0 {
		return n
	}
	if _, disk := store.(*recorder.DiskStore); disk {
		return 1
	}
	return recorder.DefaultLanes
}

// recorderLinger maps Config.RecorderLinger (or RecorderBusyLinger) to
// recorder.WriterConfig.Linger (BusyLinger): zero is def, negative none.
func recorderLinger(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// waitBounded calls wait (streams.Wait, attach.Wait) with ctx bounded to 5 s, and logs what is
// left when the streams did not end in time.
func (h *Handler) waitBounded(ctx context.Context, wait func(context.Context) error, what string) {
	bound, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if wait(bound) != nil {
		h.log.Warn(what + " still being written at shutdown were left to close with the process")
	}
}

// detachableWriter is the http.ResponseWriter handed to ReverseProxy for a direct run. Once
// ReverseProxy returned, w is set to nil: a reference ReverseProxy left behind then holds
// nothing, and a late write is dropped.
type detachableWriter struct{ w http.ResponseWriter }

var errDetached = errors.New("proxy: write after the run's client connection was taken over")

func (d *detachableWriter) Header() http.Header {
	if d.w == nil {
		return http.Header{}
	}
	return d.w.Header()
}

func (d *detachableWriter) Write(b []byte) (int, error) {
	if d.w == nil {
		return 0, errDetached
	}
	return d.w.Write(b)
}

func (d *detachableWriter) WriteHeader(code int) {
	if d.w != nil {
		d.w.WriteHeader(code)
	}
}

// Unwrap lets http.ResponseController reach the writer (ReverseProxy flushes through it).
func (d *detachableWriter) Unwrap() http.ResponseWriter { return d.w }
