package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// startError is a failure to start the proxy (the listener, the store): run prints it as one
// line, which says what to change, instead of a log record.
type startError struct {
	msg string
	err error
}

func (e *startError) Error() string { return e.msg }
func (e *startError) Unwrap() error { return e.err }

// listen opens the proxy's listener on cfg.Listen, or explains in one line why it cannot.
func listen(addr, variable string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	var msg string
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		msg = fmt.Sprintf("%s=%s: the address is already in use (another process listens there, perhaps another agui-proxy): stop it, or set %s to a free host:port", variable, addr, variable)
	case errors.Is(err, syscall.EACCES):
		msg = fmt.Sprintf("%s=%s: permission denied (ports below 1024 need privileges): use a port above 1023", variable, addr)
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		msg = fmt.Sprintf("%s=%s: no interface of this machine has that address: use 127.0.0.1, 0.0.0.0 or one of its addresses", variable, addr)
	default:
		msg = fmt.Sprintf("%s=%s: %v", variable, addr, err)
	}
	return nil, &startError{msg: msg, err: err}
}

// storeStartError explains a store that could not be opened, with what to do about it.
func storeStartError(cfg config, err error) error {
	switch {
	case storeName(cfg) == "disk" && strings.Contains(err.Error(), "in use by another process"):
		return &startError{err: err, msg: fmt.Sprintf("AGUI_STORE_PATH=%s: %v: stop the other agui-proxy (or export/import) using it, or set AGUI_STORE_PATH to another directory", cfg.StorePath, err)}
	case storeName(cfg) == "disk":
		return &startError{err: err, msg: fmt.Sprintf("AGUI_STORE_PATH=%s: %v: the directory must be writable by this user (it is created if missing)", cfg.StorePath, err)}
	case errors.Is(err, context.Canceled):
		return err
	}
	what := "AGUI_REDIS_URL=" + redactURL(cfg.RedisURL)
	switch {
	case cfg.RedisClusterAddrs != "":
		what = "AGUI_REDIS_CLUSTER_ADDRS=" + cfg.RedisClusterAddrs
	case cfg.RedisSentinelAddrs != "":
		what = "AGUI_REDIS_SENTINEL_ADDRS=" + cfg.RedisSentinelAddrs
	}
	return &startError{err: err, msg: fmt.Sprintf("%s: the Redis store did not answer: %v: start Redis there, fix the address, or unset it to record in memory (AGUI_STORE_PATH for a local disk store)", what, err)}
}

// redactURL hides a URL's password.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		if _, has := u.User.Password(); has {
			return u.Redacted()
		}
	}
	return s
}

// redisLogger sends go-redis's own log lines (a failed dial, once per attempt and pool) to
// the proxy's log at debug level: the store reports what matters as errors of its own (one
// start-up line, store errors, /readyz), so they would only repeat it, five at a time.
type redisLogger struct{ log *slog.Logger }

// Printf implements go-redis's internal.Logging.
func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.Log(ctx, slog.LevelDebug, "go-redis: "+fmt.Sprintf(format, v...))
}

// quietRedis routes go-redis's logging to log (see redisLogger).
func quietRedis(log *slog.Logger) { redis.SetLogger(redisLogger{log}) }

// version is set at build time (-ldflags "-X main.version=v1.2.3"); empty: the module
// version and VCS stamp Go recorded in the binary.
var version string

// versionLine is what agui-proxy version prints: the version, the commit it was built from
// (with "modified" for a dirty work tree), the Go version and the platform.
func versionLine() string {
	v := version
	var commit, when, dirty string
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = ", modified"
				}
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	line := "agui-proxy " + v
	if commit != "" {
		line += fmt.Sprintf(" (commit %.12s %s%s)", commit, when, dirty)
	}
	return line + fmt.Sprintf(" %s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// didYouMean returns " (did you mean X?)" for the candidate closest to s, when it is close
// enough to be a likely typo, else "".
func didYouMean(s string, candidates []string) string {
	best, bestD := "", -1
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(s), strings.ToLower(c)); bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	if bestD < 0 || bestD > max(2, len(best)/3) {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

// lookupEnv reads a variable from environ, or from the process when environ is nil.
func lookupEnv(environ map[string]string, k string) (string, bool) {
	if environ == nil {
		return os.LookupEnv(k)
	}
	v, ok := environ[k]
	return v, ok
}

// browsable returns addr as a browser can reach it: an unspecified host (0.0.0.0, ::) as
// 127.0.0.1, which reaches it from this machine.
func browsable(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// helpOut is where a command's usage goes: stdout when args ask for it (-h, -help, --help),
// so that agui-proxy export -h | less shows it, else stderr (a usage error).
func helpOut(args []string, stdout, stderr io.Writer) io.Writer {
	for _, a := range args {
		switch a {
		case "--":
			return stderr
		case "-h", "-help", "--h", "--help":
			return stdout
		}
	}
	return stderr
}
