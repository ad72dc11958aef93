// Command agui-proxy runs the AG-UI proxy in front of one agent, configured from the
// environment (agui-proxy -h lists every variable), compacts event streams (agui-proxy
// compact), or exports and imports a store's threads (agui-proxy export, agui-proxy import).
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agui-proxy/agui-proxy/hydrate"
	"github.com/agui-proxy/agui-proxy/internal/gcfloor"
	"github.com/agui-proxy/agui-proxy/keepalive"
	"github.com/agui-proxy/agui-proxy/proxy"
	"github.com/agui-proxy/agui-proxy/recorder"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// commands are agui-proxy's subcommands, for -h and for the hint on a mistyped one.
var commands = []string{"compact", "export", "import", "version", "help"}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "compact":
			return runCompact(args[1:], stdin, stdout, stderr)
		case "export", "import":
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			a := storeArgs{ctx: ctx, stderr: stderr}
			if args[0] == "export" {
				return runExport(a, args[1:], stdout)
			}
			return runImport(a, args[1:], stdin, stdout)
		case "version":
			fmt.Fprintln(stdout, versionLine())
			return 0
		case "help":
			printUsage(stdout)
			return 0
		}
		if !strings.HasPrefix(args[0], "-") {
			fmt.Fprintf(stderr, "agui-proxy: unknown command %q%s; the commands are %s (agui-proxy -h)\n",
				args[0], didYouMean(args[0], commands), strings.Join(commands, ", "))
			return 2
		}
	}
	fs := flag.NewFlagSet("agui-proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	showVersion := fs.Bool("version", false, "print the version and exit")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "agui-proxy takes no flags but -h and -version: it is configured by AGUI_* environment variables (agui-proxy -h lists them)")
	}
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" || a == "--h" {
			printUsage(stdout) // on stdout, so that agui-proxy -h | less shows it
			return 0
		}
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *showVersion {
		fmt.Fprintln(stdout, versionLine())
		return 0
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "agui-proxy: unexpected argument %q after the flags; the commands are %s (agui-proxy -h)\n",
			fs.Arg(0), strings.Join(commands, ", "))
		return 2
	}
	cfg, err := loadConfig(nil)
	if err != nil {
		fmt.Fprintf(stderr, "agui-proxy: configuration: %v\n", err)
		return 2
	}
	log := newLogger(cfg, stderr)
	slog.SetDefault(log) // what logs without a logger of its own (a panic recovered in compaction) logs here
	for _, w := range unknownVars(nil) {
		log.Warn(w)
	}
	if percent, ok := gcPercent(cfg, os.LookupEnv); ok && cfg.GCHeapFloor > 0 {
		floor := gcfloor.Start(percent, uint64(cfg.GCHeapFloor))
		defer floor.Stop()
	} else if ok {
		debug.SetGCPercent(percent)
	} else {
		log.Info("GOGC is set: AGUI_GC_PERCENT and AGUI_GC_HEAP_FLOOR are not applied")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, cfg, log, nil); err != nil {
		if se, ok := errors.AsType[*startError](err); ok {
			// One plain line that says what to change, not a log record.
			fmt.Fprintf(stderr, "agui-proxy: cannot start: %v\n", se)
			return 1
		}
		log.Error("agui-proxy stopped", slog.Any("err", err))
		return 1
	}
	return 0
}

// gcPercent returns the garbage collector target the proxy sets, cfg.GCPercent, and false when
// the environment (lookup) sets GOGC: the operator's GOGC, which the runtime has read, wins.
func gcPercent(cfg config, lookup func(string) (string, bool)) (int, bool) {
	if _, set := lookup("GOGC"); set {
		return 0, false
	}
	return cfg.GCPercent, true
}

func newLogger(cfg config, w io.Writer) *slog.Logger {
	level, _ := parseLevel(cfg.LogLevel)
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// serve runs the proxy until ctx is done, then drains. ready, if not nil, receives the
// listening address once the server accepts connections.
func serve(ctx context.Context, cfg config, log *slog.Logger, ready chan<- string) error {
	// The listener first: a taken port is reported before a store is opened (or a disk store
	// created), and the store is never left half set up for a proxy that cannot serve.
	ln, err := listen(cfg.Listen, "AGUI_LISTEN")
	if err != nil {
		return err
	}
	defer ln.Close() // (Serve closes it too; this covers the returns before Serve)
	var pprofLn net.Listener
	if cfg.PprofListen != "" {
		if pprofLn, err = listen(cfg.PprofListen, "AGUI_PPROF_LISTEN"); err != nil {
			return err
		}
		defer pprofLn.Close()
	}
	store, err := openStore(ctx, cfg, log)
	if err != nil {
		return storeStartError(cfg, err)
	}
	defer store.Close()

	trusted, _ := cfg.trustedProxies()
	durability := recorder.DurabilityAsync
	if cfg.Durability == "sync" {
		durability = recorder.DurabilitySync
	}
	var reg *prometheus.Registry
	if cfg.Metrics {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		if sr, ok := store.(recorder.StatsReporter); ok {
			reg.MustRegister(newStoreCollector(sr))
		}
	}
	// One proxy.Handler per route, all recording into the one store. A route is a "room":
	// it has its own namespace of thread ids (recorder.ThreadKey).
	routeList, _ := cfg.routes()       // validated
	perRoute, _ := cfg.routeSettings() // validated
	var fl fleet
	for _, rt := range routeList {
		pcfg := proxy.Config{
			Upstream:              rt.upstream,
			DisableRecording:      !cfg.Record,
			AttachPrefix:          cfg.AttachPrefix,
			AttachWriteTimeout:    cfg.AttachWriteTimeout,
			StreamKeepAlive:       cfg.StreamKeepAlive,
			AttachRetry:           cfg.AttachRetry,
			AttachFollowPoll:      cfg.AttachFollowPoll,
			MaxImportBytes:        cfg.MaxImportBytes,
			LeaseInterval:         cfg.LeaseInterval,
			AllowConcurrentRuns:   cfg.AllowConcurrentRuns,
			Hydrate:               hydrate.Mode(cfg.Hydrate),
			Inspector:             cfg.Inspector,
			Store:                 store,
			Durability:            durability,
			RecorderBuffer:        cfg.RecorderBuffer,
			RecorderBufferBytes:   cfg.RecorderBufferBytes,
			RecorderFullWait:      cfg.RecorderFullWait,
			RecorderLinger:        cmp.Or(cfg.RecorderLinger, -1),     // 0: none (proxy.Config's zero is the default)
			RecorderBusyLinger:    cmp.Or(cfg.RecorderBusyLinger, -1), // 0: none, as above
			RecorderLanes:         cfg.RecorderLanes,
			CheckpointMemory:      cmp.Or(cfg.CheckpointMemory, -1), // 0: none, as above
			Logger:                log.With(slog.String("route", rt.name)),
			Route:                 rt.name,
			IdentityHeader:        cfg.IdentityHeader,
			TrustedProxies:        trusted,
			MaxBodyBytes:          cfg.MaxBodyBytes,
			BodyReadTimeout:       cfg.BodyReadTimeout,
			MaxEventBytes:         cfg.MaxEventBytes,
			MaxRunDuration:        cfg.MaxRunDuration,
			MaxRunBytes:           cfg.MaxRunBytes,
			UpstreamHeaderTimeout: cfg.UpstreamHeaderTimeout,
			UpstreamIdleTimeout:   cfg.UpstreamIdleTimeout,
			ClientQueueBytes:      cfg.ClientQueueBytes,
			StoreTimeout:          cfg.StoreTimeout,
			AnonymousPassthrough:  cfg.RequireIdentity == "false",
			HeartbeatInterval:     cfg.Heartbeat,
			StopEnding:            proxy.StopEnding(perRoute[rt.name].stopEnding),
			AfterTerminal:         proxy.AfterTerminal(perRoute[rt.name].afterTerminal),
			Lineage:               proxy.Lineage(perRoute[rt.name].lineage),
		}
		if reg != nil {
			pcfg.Registerer = prometheus.WrapRegistererWith(prometheus.Labels{"route": rt.name}, reg)
		}
		h, err := proxy.New(pcfg)
		if err != nil {
			fl.shutdown(context.Background())
			return err
		}
		fl = append(fl, routeHandler{route: rt, h: h})
	}
	restCtx, stopRest := context.WithCancel(ctx)
	var restReg prometheus.Registerer
	if reg != nil {
		restReg = reg
	}
	waitRest, err := startRestCompaction(restCtx, cfg, store, log, restReg)
	if err != nil {
		stopRest()
		fl.shutdown(context.Background())
		return err
	}
	defer func() { stopRest(); waitRest() }() // before the store closes
	srv := &http.Server{
		Handler:           fl.mux(reg),
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		// No ReadTimeout or WriteTimeout: both would cut event streams. The proxy bounds
		// request bodies itself, and slow clients are dropped by their queue limit.
	}
	// The connections of the streams the proxy took over from net/http come back to the
	// server through returned once complete, for their clients' next requests (package
	// keepalive); srv.Shutdown closes it with ln.
	returned := keepalive.New(ln.Addr(), cfg.IdleTimeout)
	srv.ConnContext = returned.ConnContext
	if reg != nil {
		registerKeepAlive(reg, returned)
	}
	for _, rh := range fl {
		log.Info("agui-proxy route", slog.String("route", rh.route.name), slog.String("prefix", rh.route.prefix+"/"),
			slog.String("upstream", rh.route.upstream.String()))
	}
	log.Info("agui-proxy listening", slog.String("addr", ln.Addr().String()),
		slog.String("store", storeName(cfg)), slog.String("durability", cfg.Durability))
	if cfg.Inspector {
		for _, rh := range fl {
			log.Info("inspector: open it in a browser", slog.String("url", "http://"+browsable(ln.Addr())+rh.route.prefix+cfg.AttachPrefix+"ui/"))
		}
	}
	if ready != nil {
		ready <- ln.Addr().String()
	}
	serveErr := make(chan error, 3) // (each of the two Serve calls and the pprof server may send once)
	go func() { serveErr <- srv.Serve(ln) }()
	go func() { serveErr <- srv.Serve(returned) }()
	if pprofLn != nil {
		defer startPprof(pprofLn, log, serveErr).Close()
	}

	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: draining runs", slog.Duration("drain_timeout", cfg.DrainTimeout), slog.Int("active_runs", fl.activeRuns()))
	drainCtx, cancel := context.WithTimeout(context.Background(), cfg.DrainTimeout)
	defer cancel()
	shutdownErr := make(chan error, 1)
	go func() { shutdownErr <- srv.Shutdown(drainCtx) }()
	if err := fl.shutdown(drainCtx); err != nil {
		log.Warn("runs were interrupted at the drain deadline", slog.Any("err", err))
	}
	// Every run has ended, so every stream handler returns; give them a moment to finish writing.
	closeCtx, cancelClose := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelClose()
	select {
	case err := <-shutdownErr:
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
	case <-closeCtx.Done():
		srv.Close()
	}
	log.Info("agui-proxy stopped")
	return nil
}

func storeName(cfg config) string {
	rc, _ := cfg.redisConfig()
	switch {
	case len(rc.ClusterAddrs) > 0:
		return "redis-cluster"
	case len(rc.SentinelAddrs) > 0:
		return "redis-sentinel"
	case cfg.redisEnabled():
		return "redis"
	case cfg.StorePath != "":
		return "disk"
	}
	return "memory"
}

// openStore returns the configured store: Redis when a Redis topology is configured (a URL,
// Cluster seed addresses or sentinels), the embedded disk store when AGUI_STORE_PATH is, else
// memory.
func openStore(ctx context.Context, cfg config, log *slog.Logger) (recorder.Store, error) {
	if !cfg.redisEnabled() && cfg.StorePath != "" {
		s, err := recorder.OpenDiskStore(ctx, recorder.DiskConfig{
			Dir: cfg.StorePath, TTL: cfg.RetentionTTL, MaxEventsPerRun: int(cfg.RetentionMaxEvents), Logger: log,
		})
		if err != nil {
			return nil, fmt.Errorf("opening the disk store: %w", err)
		}
		return s, nil
	}
	if !cfg.redisEnabled() {
		log.Warn("no Redis store (AGUI_REDIS_URL, AGUI_REDIS_CLUSTER_ADDRS, AGUI_REDIS_SENTINEL_ADDRS) or AGUI_STORE_PATH: recording in memory; history is lost on restart and not shared between replicas")
		return recorder.NewMemoryStore(recorder.MemoryConfig{TTL: cfg.RetentionTTL, MaxEventsPerRun: int(cfg.RetentionMaxEvents), MaxBytes: cfg.MemoryMaxBytes}), nil
	}
	rc, err := cfg.redisConfig()
	if err != nil {
		return nil, err
	}
	rc.Logger = log
	quietRedis(log)
	s, err := recorder.NewRedisStore(ctx, rc)
	if err != nil {
		return nil, fmt.Errorf("opening the Redis store: %w", err)
	}
	s.CheckConfig(ctx)
	return s, nil
}

// registerer avoids a typed-nil interface when metrics are off.
func registerer(reg *prometheus.Registry) prometheus.Registerer {
	if reg == nil {
		return nil
	}
	return reg
}

// routeHandler is the proxy of one route.
type routeHandler struct {
	route route
	h     *proxy.Handler
}

// fleet is the proxies of every route, served by one server.
type fleet []routeHandler

// mux serves the operational endpoints and hands everything else to the route's proxy:
// /healthz (the process is alive), /readyz (accepting runs: not draining, store reachable)
// and /metrics (Prometheus, when enabled). A route with a prefix sees paths without it, so its
// attach endpoints live under <prefix><AGUI_ATTACH_PREFIX>.
func (fl fleet) mux(reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		for _, rh := range fl {
			if err := rh.h.Ready(ctx); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				io.WriteString(w, "not ready: "+readyReason(err)+"\n")
				return
			}
		}
		io.WriteString(w, "ready\n")
	})
	if reg != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	}
	for _, rh := range fl {
		if rh.route.prefix == "" {
			mux.Handle("/", rh.h)
		} else {
			mux.Handle(rh.route.prefix+"/", http.StripPrefix(rh.route.prefix, rh.h))
		}
	}
	return mux
}

func (fl fleet) activeRuns() int {
	n := 0
	for _, rh := range fl {
		n += rh.h.ActiveRuns()
	}
	return n
}

// shutdown drains every route at once.
func (fl fleet) shutdown(ctx context.Context) error {
	errs := make(chan error, len(fl))
	for _, rh := range fl {
		go func() { errs <- rh.h.Shutdown(ctx) }()
	}
	var all []error
	for range fl {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// readyReason keeps store error details (addresses) out of the readiness answer.
func readyReason(err error) string {
	if errors.Is(err, proxy.ErrShuttingDown) {
		return "shutting down"
	}
	if errors.Is(err, recorder.ErrDiskFull) {
		return "store disk full"
	}
	return "store unreachable"
}

// startPprof serves net/http/pprof on its own listener, ln.
func startPprof(ln net.Listener, log *slog.Logger, errs chan<- error) *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	log.Info("pprof listening", slog.String("addr", ln.Addr().String()))
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs <- err
		}
	}()
	return srv
}
