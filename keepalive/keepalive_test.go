package keepalive_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"github.com/agui-proxy/agui-proxy/keepalive"
)

// takeOver answers like the proxy's run streams: it writes the headers, takes the connection
// over, writes a chunked body itself and hands the connection back when the response is
// complete (when the server has a Listener and nothing past the request was read).
func takeOver(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Transfer-Encoding", "chunked")
	ka := keepalive.FromContext(r.Context())
	if ka == nil {
		w.Header().Set("Connection", "close")
	}
	w.WriteHeader(http.StatusOK)
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	fmt.Fprintf(conn, "5\r\nhello\r\n0\r\n\r\n")
	if ka != nil && brw.Reader.Buffered() == 0 {
		ka.Return(conn)
		return
	}
	conn.Close()
}

// serve starts an http.Server on a real socket with a keepalive.Listener beside it (idle is
// its idle timeout; ka false: none). It returns the server's URL and its Listener.
func serve(t *testing.T, h http.Handler, ka bool, idle time.Duration) (string, *keepalive.Listener, *http.Server) {
	t.Helper()
	return serveHeaderTimeout(t, h, ka, idle, 5*time.Second)
}

// serveHeaderTimeout is serve with the server's ReadHeaderTimeout.
func serveHeaderTimeout(t *testing.T, h http.Handler, ka bool, idle, header time.Duration) (string, *keepalive.Listener, *http.Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: header}
	var l *keepalive.Listener
	if ka {
		l = keepalive.New(ln.Addr(), idle)
		srv.ConnContext = l.ConnContext
		go srv.Serve(l)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String(), l, srv
}

// post sends n requests one after the other on one client and returns how many were sent on
// a connection an earlier one used.
func post(t *testing.T, url string, n int) int {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	reused := 0
	for i := range n {
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) {
				if info.Reused {
					reused++
				}
			},
		})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"n":1}`))
		res, err := client.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || string(body) != "hello" {
			t.Fatalf("request %d: body %q, %v", i, body, err)
		}
	}
	return reused
}

func TestReturnedConnectionCarriesTheNextRequest(t *testing.T) {
	url, ka, _ := serve(t, http.HandlerFunc(takeOver), true, time.Minute)
	if got := post(t, url, 5); got != 4 {
		t.Errorf("%d of 5 requests reused a connection, want 4", got)
	}
	waitReturned(ka, 5)
	if st := ka.Stats(); st.Returned != 5 || st.Reused != 4 {
		t.Errorf("Stats() = %+v, want 5 returned, 4 reused", st)
	}
}

func TestWithoutListenerEveryResponseCloses(t *testing.T) {
	url, _, _ := serve(t, http.HandlerFunc(takeOver), false, 0)
	if got := post(t, url, 3); got != 0 {
		t.Errorf("%d of 3 requests reused a connection, want 0 (Connection: close)", got)
	}
}

// waitReturned waits (10 s at most) until ka counts n connections handed back: a response's
// connection may reach Return just after its client read the response.
func waitReturned(ka *keepalive.Listener, n int64) {
	for i := 0; ka.Stats().Returned < n && i < 1000; i++ {
		time.Sleep(10 * time.Millisecond)
	}
}

// exchange sends one request on conn and reads its whole response.
func exchange(t *testing.T, conn net.Conn, br *bufio.Reader) {
	t.Helper()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	if err != nil || string(body) != "hello" || res.Close {
		t.Fatalf("body %q, %v, Connection: close %v", body, err, res.Close)
	}
}

// closedByServer reports whether the server closed conn (the client reads EOF) within 10 s.
func closedByServer(conn net.Conn, br *bufio.Reader) error {
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if b, err := br.ReadByte(); err != io.EOF {
		return fmt.Errorf("read %q, %v; want EOF", b, err)
	}
	return nil
}

func dial(t *testing.T, url string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, bufio.NewReader(conn)
}

func TestIdleConnectionIsClosedAfterIdleTimeout(t *testing.T) {
	url, _, _ := serve(t, http.HandlerFunc(takeOver), true, 50*time.Millisecond)
	conn, br := dial(t, url)
	exchange(t, conn, br)
	exchange(t, conn, br) // the first went back, and carried this one
	if err := closedByServer(conn, br); err != nil {
		t.Error(err)
	}
}

// TestStalledNextRequestIsCutByTheServer: a client that sends part of its next request and
// stalls is the server's to cut (ReadHeaderTimeout), like a new connection's: the Listener
// hands the connection over at the first byte.
func TestStalledNextRequestIsCutByTheServer(t *testing.T) {
	url, _, _ := serveHeaderTimeout(t, http.HandlerFunc(takeOver), true, time.Hour, 200*time.Millisecond)
	conn, br := dial(t, url)
	exchange(t, conn, br)
	time.Sleep(300 * time.Millisecond)                     // (idle longer than ReadHeaderTimeout: the idle wait is the Listener's)
	io.WriteString(conn, "POST / HTTP/1.1\r\nHost: x\r\n") // no end of headers
	if err := closedByServer(conn, br); err != nil {
		t.Error(err)
	}
}

func TestCloseClosesWaitingConnections(t *testing.T) {
	url, ka, _ := serve(t, http.HandlerFunc(takeOver), true, time.Hour)
	conn, br := dial(t, url)
	exchange(t, conn, br)
	ka.Close() // returns once the watcher is gone
	if err := closedByServer(conn, br); err != nil {
		t.Error(err)
	}
	returnCloses(t, ka, "a closed Listener")
	if _, err := ka.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
	}
	ka.Close() // twice is allowed
}

func TestShutdownClosesTheListener(t *testing.T) {
	url, _, srv := serve(t, http.HandlerFunc(takeOver), true, time.Hour)
	conn, br := dial(t, url)
	exchange(t, conn, br)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := closedByServer(conn, br); err != nil {
		t.Error(err)
	}
}

func TestClientThatLeavesIsClosed(t *testing.T) {
	url, ka, _ := serve(t, http.HandlerFunc(takeOver), true, time.Hour)
	conn, br := dial(t, url)
	exchange(t, conn, br)
	exchange(t, conn, br)
	waitReturned(ka, 2)
	conn.Close()
	// The watcher sees the client's end and closes the connection itself.
	for range 1000 {
		if st := ka.Stats(); st.Waiting == 0 {
			if st.Returned != 2 || st.Reused != 1 {
				t.Errorf("Stats() = %+v, want 2 returned, 1 reused (the second exchange), none waiting", st)
			}
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("Stats() = %+v an hour before the idle timeout: the connection its client closed still waits", ka.Stats())
}

func TestReturnOfAConnectionItCannotWatch(t *testing.T) {
	ka := keepalive.New(&net.TCPAddr{}, time.Minute)
	defer ka.Close()
	a, b := net.Pipe() // not a system socket
	if ka.Return(a) {
		t.Error("Return kept a connection it cannot watch")
	}
	if _, err := b.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("read %v, want EOF (closed)", err)
	}
}

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return b, a
}

// TestForAndHijacked: a request that asked to close its connection has no Listener, nor has
// one whose server has none; a hijacked connection whose reader holds bytes past the request
// is not kept; a nil Listener's Return closes what it gets.
func TestForAndHijacked(t *testing.T) {
	ka := keepalive.New(&net.TCPAddr{}, time.Minute)
	defer ka.Close()
	ctx := ka.ConnContext(context.Background(), nil)
	req := func(close bool) *http.Request {
		r, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://x/", nil)
		r.Close = close
		return r
	}
	if got := keepalive.For(req(false)); got != ka {
		t.Errorf("For(keep-alive request) = %p, want the Listener %p", got, ka)
	}
	if got := keepalive.For(req(true)); got != nil {
		t.Errorf("For(Connection: close request) = %p, want nil", got)
	}
	plain, _ := http.NewRequest(http.MethodPost, "http://x/", nil)
	if got := keepalive.For(plain); got != nil {
		t.Errorf("For(request of a server without a Listener) = %p, want nil", got)
	}
	empty := bufio.NewReadWriter(bufio.NewReader(strings.NewReader("")), nil)
	if got := ka.Hijacked(empty); got != ka {
		t.Errorf("Hijacked(nothing buffered) = %p, want the Listener", got)
	}
	pipelined := bufio.NewReadWriter(bufio.NewReader(strings.NewReader("GET / HTTP/1.1\r\n")), nil)
	pipelined.Reader.Peek(1)
	if got := ka.Hijacked(pipelined); got != nil {
		t.Errorf("Hijacked(bytes buffered past the request) = %p, want nil", got)
	}
	var none *keepalive.Listener
	if none.Hijacked(empty) != nil {
		t.Error("a nil Listener's Hijacked is not nil")
	}
	returnCloses(t, none, "a nil Listener")
}

// returnCloses returns a fresh connection to l and checks that l closed it instead of keeping
// it (what names l in the errors).
func returnCloses(t *testing.T, l *keepalive.Listener, what string) {
	t.Helper()
	a, b := tcpPair(t)
	if l.Return(a) {
		t.Errorf("%s kept a connection", what)
	}
	b.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := b.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("a connection returned to %s: read %v, want EOF (closed)", what, err)
	}
}
