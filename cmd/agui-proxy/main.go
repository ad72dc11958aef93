// Command agui-proxy runs the AG-UI proxy in front of one agent, configured from the
// environment (agui-proxy -h lists every variable), or compacts event streams
// (agui-proxy compact).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/agui-proxy/agui-proxy/proxy"
	"github.com/agui-proxy/agui-proxy/recorder"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "compact" {
		return runCompact(args[1:], stdin, stdout, stderr)
	}
	fs := flag.NewFlagSet("agui-proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { printUsage(stderr) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	cfg, err := loadConfig(nil)
	if err != nil {
		fmt.Fprintf(stderr, "agui-proxy: configuration: %v\n", err)
		return 2
	}
	log := newLogger(cfg, stderr)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, cfg, log, nil); err != nil {
		log.Error("agui-proxy stopped", slog.Any("err", err))
		return 1
	}
	return 0
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
	store, err := openStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer store.Close()

	upstream, _ := url.Parse(cfg.Upstream) // validated
	trusted, _ := cfg.trustedProxies()
	durability := recorder.DurabilityAsync
	if cfg.Durability == "sync" {
		durability = recorder.DurabilitySync
	}
	h, err := proxy.New(proxy.Config{
		Upstream:              upstream,
		Store:                 store,
		Durability:            durability,
		RecorderBuffer:        cfg.RecorderBuffer,
		Logger:                log,
		Route:                 cfg.Route,
		IdentityHeader:        cfg.IdentityHeader,
		TrustedProxies:        trusted,
		MaxBodyBytes:          cfg.MaxBodyBytes,
		BodyReadTimeout:       cfg.BodyTimeout,
		MaxEventBytes:         cfg.MaxEventBytes,
		MaxRunDuration:        cfg.MaxRunDuration,
		ResponseHeaderTimeout: cfg.HeaderTimeout,
		UpstreamIdleTimeout:   cfg.IdleTimeout,
		ClientQueueBytes:      cfg.ClientQueue,
		HeartbeatInterval:     cfg.Heartbeat,
	})
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cfg.ReadHeader,
		IdleTimeout:       cfg.KeepAlive,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		// No ReadTimeout or WriteTimeout: both would cut event streams. The proxy bounds
		// request bodies itself, and slow clients are dropped by their queue limit.
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	log.Info("agui-proxy listening", slog.String("addr", ln.Addr().String()), slog.String("upstream", cfg.Upstream),
		slog.String("store", storeName(cfg)), slog.String("durability", cfg.Durability))
	if ready != nil {
		ready <- ln.Addr().String()
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: draining runs", slog.Duration("drain_timeout", cfg.DrainTimeout), slog.Int("active_runs", h.ActiveRuns()))
	drainCtx, cancel := context.WithTimeout(context.Background(), cfg.DrainTimeout)
	defer cancel()
	shutdownErr := make(chan error, 1)
	go func() { shutdownErr <- srv.Shutdown(drainCtx) }()
	if err := h.Shutdown(drainCtx); err != nil {
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
	if cfg.RedisURL == "" {
		return "memory"
	}
	return "redis"
}

// openStore returns the configured store: Redis when AGUI_REDIS_URL is set, else memory.
func openStore(ctx context.Context, cfg config, log *slog.Logger) (recorder.Store, error) {
	if cfg.RedisURL == "" {
		log.Warn("no AGUI_REDIS_URL: recording in memory; history is lost on restart and not shared between replicas")
		return recorder.NewMemoryStore(recorder.MemoryConfig{TTL: cfg.RetentionTTL, MaxEventsPerRun: int(cfg.RetentionMax)}), nil
	}
	s, err := recorder.NewRedisStore(ctx, recorder.RedisConfig{
		URL: cfg.RedisURL, Prefix: cfg.RedisPrefix, TTL: cfg.RetentionTTL, MaxEventsPerRun: cfg.RetentionMax, Logger: log,
	})
	if err != nil {
		return nil, fmt.Errorf("opening the Redis store: %w", err)
	}
	s.CheckConfig(ctx)
	return s, nil
}
