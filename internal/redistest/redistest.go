package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// InstallHint is printed when redis-server is missing.
const InstallHint = "redis-server not found in PATH; install it with: apt-get install -y redis-server"

// Server is a private redis-server process.
type Server struct {
	t    testing.TB
	bin  string
	args []string
	port int
	dir  string
	cmd  *exec.Cmd
	wait chan error // receives cmd.Wait's result once
}

// Start starts redis-server on a free 127.0.0.1 port with `--save "" --appendonly no` and its
// directory in t.TempDir(); args are appended and override those defaults (e.g.
// "--appendonly", "yes"). It waits until PING answers and kills the server in t.Cleanup.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal(InstallHint)
	}
	s := &Server{t: t, bin: bin, args: args, dir: t.TempDir()}
	t.Cleanup(s.cleanup)
	var lastErr error
	for range 5 { // another process may grab the free port between probe and bind
		s.port = freePort(t)
		if lastErr = s.start(); lastErr == nil {
			return s
		}
	}
	t.Fatalf("redistest: starting redis-server: %v", lastErr)
	return nil
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// start launches the process and waits for PING.
func (s *Server) start() error {
	argv := []string{
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--logfile", filepath.Join(s.dir, "redis.log"), "--protected-mode", "no",
	}
	argv = append(argv, s.args...)
	cmd := exec.Command(s.bin, argv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test binary
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd = cmd
	s.wait = make(chan error, 1)
	go func() { s.wait <- cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-s.wait:
			s.cmd = nil
			return fmt.Errorf("redis-server exited at start (%v); log: %s", err, s.logTail())
		default:
		}
		if ping(s.Addr()) == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.kill()
	return fmt.Errorf("redis-server on %s did not answer PING within 10s; log: %s", s.Addr(), s.logTail())
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// ping sends an inline PING over a fresh connection.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// Addr returns "127.0.0.1:<port>".
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// URL returns "redis://127.0.0.1:<port>/0".
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Dir returns the server's data directory.
func (s *Server) Dir() string { return s.dir }

func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	if s.cmd == nil {
		s.t.Fatalf("redistest: server on %s is not running", s.Addr())
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("redistest: signal %v: %v", sig, err)
	}
}

// Stop freezes the server (SIGSTOP): connections stay open, nothing is answered.
func (s *Server) Stop() { s.t.Helper(); s.signal(syscall.SIGSTOP) }

// Continue resumes a stopped server (SIGCONT).
func (s *Server) Continue() { s.t.Helper(); s.signal(syscall.SIGCONT) }

// Kill crashes the server (SIGKILL) and waits for it to exit.
func (s *Server) Kill() {
	s.t.Helper()
	if s.cmd == nil {
		return
	}
	s.kill()
}

func (s *Server) kill() {
	s.cmd.Process.Kill()
	<-s.wait
	s.cmd = nil
}

// Restart starts the server again on the same port and directory (killing it first if it
// runs). With AOF on it comes back with its data; with the defaults it comes back empty.
func (s *Server) Restart() {
	s.t.Helper()
	if s.cmd != nil {
		s.kill()
	}
	var err error
	for range 50 { // the port may linger briefly after a kill
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatalf("redistest: restarting redis-server: %v", err)
}

// Client returns a go-redis client for the server, closed in t.Cleanup.
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { c.Close() })
	return c
}

func (s *Server) cleanup() {
	if s.cmd != nil {
		s.cmd.Process.Signal(syscall.SIGCONT) // a stopped process still dies on SIGKILL, but be tidy
		s.kill()
	}
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
