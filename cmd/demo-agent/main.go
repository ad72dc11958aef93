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
	"os"
	"os/signal"
	"reflect"
	"strings"
	"syscall"
	"time"

	"github.com/agui-proxy/agui-proxy/internal/demoagent"
	"github.com/caarlos0/env/v11"
)

// config is the process configuration, read from the environment.
type config struct {
	Listen          string        `env:"DEMO_LISTEN" envDefault:"127.0.0.1:8000" help:"address to listen on"`
	Delay           time.Duration `env:"DEMO_DELAY" envDefault:"0s" help:"pause between events of paced scenarios (slow, bench) without intervalMs; 0 = scenario default"`
	LogLevel        slog.Level    `env:"DEMO_LOG_LEVEL" envDefault:"info" help:"debug, info, warn or error"`
	ShutdownTimeout time.Duration `env:"DEMO_SHUTDOWN_TIMEOUT" envDefault:"10s" help:"how long running streams may continue after SIGINT/SIGTERM"`
}

func main() {
	fs := flag.NewFlagSet("demo-agent", flag.ContinueOnError)
	fs.Usage = func() { usage(fs.Output()) }
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	cfg, err := env.ParseAs[config]()
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo-agent:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, log, nil); err != nil {
		log.Error("demo-agent stopped", "err", err)
		os.Exit(1)
	}
}

// usage prints the command line and the environment variables with their defaults.
func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: demo-agent [-h]\n\nA scripted AG-UI agent. Scenarios:", strings.Join(demoagent.Scenarios(), ", "))
	fmt.Fprintln(w, "\nEnvironment variables:")
	t := reflect.TypeFor[config]()
	for i := range t.NumField() {
		f := t.Field(i)
		fmt.Fprintf(w, "  %-22s %s (default %q)\n", f.Tag.Get("env"), f.Tag.Get("help"), f.Tag.Get("envDefault"))
	}
}

// run serves the agent until ctx ends, then shuts down gracefully. ready, if set, receives the
// bound address once the listener is open.
func run(ctx context.Context, cfg config, log *slog.Logger, ready func(net.Addr)) error {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listening on %q: %w", cfg.Listen, err)
	}
	// Streams derive their context from base: cancelling it stops runs still going when the
	// shutdown timeout expires (http.Server.Shutdown does not end streaming handlers).
	base, cancelStreams := context.WithCancel(context.Background())
	defer cancelStreams()
	srv := &http.Server{
		Handler:           demoagent.New(demoagent.Config{Delay: cfg.Delay, Logger: log}),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("demo agent listening", "addr", ln.Addr().String(), "scenarios", len(demoagent.Scenarios()))
	if ready != nil {
		ready(ln.Addr())
	}

	select {
	case err := <-served:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down", "timeout", cfg.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	err = srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		log.Warn("streams still running at the shutdown timeout; cancelling them")
		cancelStreams()
		err = srv.Close()
	}
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		return errors.Join(err, serr)
	}
	return err
}
