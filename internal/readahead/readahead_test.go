package readahead

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/agui-proxy/agui-proxy/internal/runtest"
)

// countingConn counts the reads that reach the socket.
type countingConn struct {
	net.Conn
	reads int
}

func (c *countingConn) Read(p []byte) (int, error) {
	c.reads++
	return c.Conn.Read(p)
}

// TestReadAheadBytes: whatever the writes and the read sizes, a Conn returns the bytes the
// peer wrote, in order, then io.EOF once the peer closes.
func TestReadAheadBytes(t *testing.T) {
	for seed := range uint64(20) {
		rnd := rand.New(rand.NewPCG(seed, 7))
		client, server := runtest.TCPPair(t)
		want := make([]byte, 200<<10)
		for i := range want {
			want[i] = byte(rnd.IntN(256))
		}
		go func() {
			rest := want
			for len(rest) > 0 {
				n := min(len(rest), 1+rnd.IntN(3*Size))
				if _, err := server.Write(rest[:n]); err != nil {
					return
				}
				rest = rest[n:]
			}
			server.Close()
		}()
		c := New(client)
		var got []byte
		rsize := rand.New(rand.NewPCG(seed, 8))
		for {
			p := make([]byte, 1+rsize.IntN(2*Size))
			n, err := c.Read(p)
			got = append(got, p[:n]...)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("seed %d: %v after %d bytes", seed, err, len(got))
			}
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("seed %d: read %d bytes that differ from the %d written", seed, len(got), len(want))
		}
		if c.buf != nil {
			t.Fatalf("seed %d: holds a buffer at EOF", seed)
		}
	}
}

// TestReadAheadBurst: through net/http's 1 KiB bufio.Reader, a burst of 256 KiB takes a
// read system call per KiB from the connection itself and about one per Size through a Conn,
// which holds no buffer once the burst is read.
func TestReadAheadBurst(t *testing.T) {
	const total = 256 << 10
	reads := func(wrap bool) int {
		client, server := runtest.TCPPair(t)
		counted := &countingConn{Conn: client}
		var conn net.Conn = counted
		var ra *Conn
		if wrap {
			ra = New(counted)
			conn = ra
		}
		data := bytes.Repeat([]byte("data: {\"type\":\"TEXT_MESSAGE_CONTENT\"}\n\n"), total/39+1)[:total]
		// Written whole before the reads start, as an agent that outruns its reader leaves it.
		go func() { server.Write(data); server.Close() }()
		// Small reads, as net/http's chunked reader makes for events of a few hundred bytes:
		// the bufio.Reader fills its buffer from the connection, a KiB at a time.
		br := bufio.NewReaderSize(conn, 1<<10)
		var got []byte
		p := make([]byte, 300)
		var err error
		for {
			var n int
			n, err = br.Read(p)
			got = append(got, p[:n]...)
			if err != nil {
				break
			}
		}
		if err != io.EOF || !bytes.Equal(got, data) {
			t.Fatalf("read %d bytes (%v), want the %d written", len(got), err, len(data))
		}
		if ra != nil && (ra.buf != nil) {
			t.Fatal("holds a buffer once the burst is read")
		}
		return counted.reads
	}
	direct, ahead := reads(false), reads(true)
	t.Logf("socket reads for %d KiB through a 1 KiB bufio.Reader: %d direct, %d read ahead", total>>10, direct, ahead)
	if ahead*4 > direct {
		t.Errorf("read ahead: %d socket reads, want at most a quarter of the %d without", ahead, direct)
	}
}

// TestReadAheadIdle: a read that does not fill its caller's buffer (a stream that waits for
// its next event) goes straight to the connection, and nothing is held after it.
func TestReadAheadIdle(t *testing.T) {
	client, server := runtest.TCPPair(t)
	c := New(client)
	p := make([]byte, 1<<10)
	for i := range 50 {
		ev := []byte("data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"delta\":\"x\"}\n\n")
		if _, err := server.Write(ev); err != nil {
			t.Fatal(err)
		}
		n, err := io.ReadAtLeast(c, p, len(ev))
		if err != nil || !bytes.Equal(p[:n], ev) {
			t.Fatalf("event %d: read %q, %v", i, p[:n], err)
		}
		if c.burst || c.buf != nil {
			t.Fatalf("event %d: a stream of small events reads ahead", i)
		}
	}
}

// errConn returns its bytes together with an error, in one Read.
type errConn struct {
	net.Conn
	data []byte
	err  error
}

func (c *errConn) Read(p []byte) (int, error) {
	n := copy(p, c.data)
	c.data = c.data[n:]
	return n, c.err
}

// TestReadAheadErrorAfterBytes: an error that comes with bytes read ahead is returned once
// those bytes are read, never before and never instead of them.
func TestReadAheadErrorAfterBytes(t *testing.T) {
	boom := errors.New("connection reset")
	c := New(&errConn{data: bytes.Repeat([]byte("x"), 3000), err: boom})
	c.burst = true // as after a read that filled its buffer
	p := make([]byte, 1000)
	total := 0
	for range 3 {
		n, err := c.Read(p)
		if err != nil {
			t.Fatalf("error %v after %d of the 3000 bytes read ahead", err, total+n)
		}
		total += n
	}
	if n, err := c.Read(p); n != 0 || !errors.Is(err, boom) {
		t.Fatalf("after the bytes: %d, %v; want 0 and the connection's error", n, err)
	}
}

// TestReadAheadUnderTLS: the proxy wraps the TCP connection, so an https upstream's TLS (and
// HTTP/2, when negotiated) reads through a Conn; a response streamed in bursts arrives whole
// either way.
func TestReadAheadUnderTLS(t *testing.T) {
	body := bytes.Repeat([]byte("data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"delta\":\"xyz\"}\n\n"), 20000)
	for _, h2 := range []bool{false, true} {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			for rest := body; len(rest) > 0; {
				n := min(len(rest), 37<<10)
				w.Write(rest[:n])
				w.(http.Flusher).Flush()
				rest = rest[n:]
			}
		}))
		srv.EnableHTTP2 = h2
		srv.StartTLS()
		defer srv.Close()
		tr := srv.Client().Transport.(*http.Transport).Clone()
		tr.ForceAttemptHTTP2 = h2
		tr.ReadBufferSize = 1 << 10
		wrapped := 0
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			wrapped++
			return New(c), nil
		}
		res, err := (&http.Client{Transport: tr}).Get(srv.URL)
		if err != nil {
			t.Fatalf("h2=%v: %v", h2, err)
		}
		got, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || !bytes.Equal(got, body) || wrapped != 1 {
			t.Fatalf("h2=%v: read %d bytes (%v) through %d wrapped connections, want the %d sent through one", h2, len(got), err, wrapped, len(body))
		}
		if h2 && res.ProtoMajor != 2 {
			t.Errorf("h2=%v: served over HTTP/%d", h2, res.ProtoMajor)
		}
		tr.CloseIdleConnections()
	}
}
