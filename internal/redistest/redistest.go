package redistest

import (
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// InstallHint is printed when redis-server is missing.
const InstallHint = "redis-server not found in PATH; install it with: apt-get install -y redis-server"

// Server is a private redis-server process for one test: a Node that fails the test instead
// of returning errors and is killed in t.Cleanup.
type Server struct {
	t    testing.TB
	node *Node
}

// Start starts redis-server on a free 127.0.0.1 port with `--save "" --appendonly no` and its
// directory in t.TempDir(); args are appended and override those defaults (e.g.
// "--appendonly", "yes"). It waits until PING answers PONG (the data is loaded) and kills the
// server in t.Cleanup.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	bin, err := lookRedis()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	n := &Node{bin: bin, dir: dir, pong: true, argv: func(port int) []string { return append(baseArgs(port, dir), args...) }}
	t.Cleanup(n.Kill)
	var lastErr error
	for range 5 { // another process may grab the free port between probe and bind
		ports, err := freePorts(1)
		if err != nil {
			t.Fatalf("redistest: finding a free port: %v", err)
		}
		n.port = ports[0]
		if lastErr = n.start(); lastErr == nil {
			return &Server{t: t, node: n}
		}
	}
	t.Fatalf("redistest: starting redis-server: %v", lastErr)
	return nil
}

// Addr returns "127.0.0.1:<port>".
func (s *Server) Addr() string { return s.node.Addr() }

// URL returns "redis://127.0.0.1:<port>/0".
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Dir returns the server's data directory.
func (s *Server) Dir() string { return s.node.Dir() }

func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	if err := s.node.signal(sig); err != nil {
		s.t.Fatalf("redistest: signal %v to the server on %s: %v", sig, s.Addr(), err)
	}
}

// Stop freezes the server (SIGSTOP): connections stay open, nothing is answered.
func (s *Server) Stop() { s.t.Helper(); s.signal(syscall.SIGSTOP) }

// Continue resumes a stopped server (SIGCONT).
func (s *Server) Continue() { s.t.Helper(); s.signal(syscall.SIGCONT) }

// Kill crashes the server (SIGKILL) and waits for it to exit.
func (s *Server) Kill() { s.node.Kill() }

// Restart starts the server again on the same port and directory (killing it first if it
// runs). With AOF on it comes back with its data; with the defaults it comes back empty.
func (s *Server) Restart() {
	s.t.Helper()
	s.node.Kill()
	if err := s.node.Restart(); err != nil {
		s.t.Fatalf("redistest: restarting redis-server: %v", err)
	}
}

// Client returns a go-redis client for the server, closed in t.Cleanup.
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { c.Close() })
	return c
}

// WaitFor polls cond every 10 ms until it holds or timeout passes, then fails the test with
// what. It is the bounded polling loop fault tests use instead of sleeping.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("redistest: timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
