// Package keepalive gives the HTTP server back the connections that handlers took over
// (http.Hijacker) once their response is complete, so that an HTTP/1.1 client's next request
// travels on the same connection instead of a new one.
//
// The proxy writes a run's event stream to the client's socket itself: it takes the
// connection over from net/http once the headers are sent, so that a stream holds neither a
// goroutine nor a buffer of net/http's while it is idle (see live.Subscriber.ServeConn). A
// connection taken over is never handed back to net/http, so without this package such a
// response has to say Connection: close, and each run a client starts costs it (and every
// load balancer in between) a new connection. With it, a stream that ended cleanly hands its
// connection to a Listener, which waits, at most the idle timeout, for the client's next
// request, then hands the connection to the server's Serve loop as if it were new.
//
// Wiring, next to the server's own listener:
//
//	ka := keepalive.New(ln.Addr(), idleTimeout)
//	srv := &http.Server{Handler: h, ConnContext: ka.ConnContext}
//	go srv.Serve(ln)
//	go srv.Serve(ka) // srv.Shutdown and srv.Close close ka too
//
// A handler finds the Listener of its connection with FromContext(r.Context()) (nil: the
// server was not set up with one, and a response taken over must close its connection).
package keepalive

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Listener is a net.Listener whose connections are the ones handlers handed back (Return),
// each once its client sent its next request. Serve an http.Server on it beside the server's
// own listener. Its methods may be called concurrently.
type Listener struct {
	addr net.Addr
	idle time.Duration

	ready chan net.Conn // connections whose next request arrived, for Accept
	done  chan struct{} // closed by Close

	mu       sync.Mutex
	closed   bool
	watching map[net.Conn]struct{} // connections waiting for their next request
	watchers sync.WaitGroup

	returned, reused atomic.Int64 // see Stats
}

// Stats counts what a Listener did since New.
type Stats struct {
	// Returned counts the connections handed back (Return) and watched.
	Returned int64
	// Reused counts those whose client sent another request (handed to Accept, unless the
	// Listener closed first).
	Reused int64
	// Waiting is how many wait for their client's next request now.
	Waiting int
}

// Stats returns the Listener's counts. Returned - Reused - Waiting of the connections handed
// back were closed without another request: idle too long, their client left, or the
// Listener closed.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	waiting := len(l.watching)
	l.mu.Unlock()
	return Stats{Returned: l.returned.Load(), Reused: l.reused.Load(), Waiting: waiting}
}

// New returns a Listener whose Addr is addr (the server's own listener's, so that what net/http
// reports as the local address stays true) and that waits at most idle for a returned
// connection's next request; idle <= 0 waits as long as the client keeps the connection.
func New(addr net.Addr, idle time.Duration) *Listener {
	return &Listener{addr: addr, idle: idle, ready: make(chan net.Conn), done: make(chan struct{}), watching: map[net.Conn]struct{}{}}
}

// Accept returns the next returned connection whose client sent a request, or net.ErrClosed
// once the Listener is closed.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Addr is the address New was given.
func (l *Listener) Addr() net.Addr { return l.addr }

// Close stops the Listener: the connections still waiting for their next request are closed,
// and Close returns once nothing of the Listener's runs. Later Return calls close the
// connection they are given. Closing twice is allowed.
func (l *Listener) Close() error {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.done)
		for c := range l.watching {
			c.Close() // its watcher's wait ends with an error
		}
	}
	l.mu.Unlock()
	l.watchers.Wait()
	return nil
}

// Return hands back conn, taken over from the server, once the response on it is complete:
// its request's body was read to its end, the last byte of the response written, and nothing
// past that request was read from conn (http.Hijacker's reader holds nothing buffered). The
// Listener then owns conn: it waits for the client's next request, at most the idle timeout,
// and hands conn to Accept when it comes. A connection whose client sent nothing in time or
// closed its end, or that cannot be watched without reading from it, is closed, as is one
// returned to or waiting in a closed Listener, or to a nil Listener (a server without one).
// Return reports whether conn is being watched.
func (l *Listener) Return(conn net.Conn) bool {
	var wait func() error
	if l != nil {
		wait = readable(conn)
	}
	if wait == nil {
		conn.Close()
		return false
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		conn.Close()
		return false
	}
	l.watching[conn] = struct{}{}
	l.watchers.Add(1)
	l.mu.Unlock()
	l.returned.Add(1)
	go l.watch(conn, wait)
	return true
}

// watch waits for conn's next request and hands conn to Accept; it closes conn when none
// comes in time or the Listener closes first.
func (l *Listener) watch(conn net.Conn, wait func() error) {
	defer l.watchers.Done()
	var deadline time.Time
	if l.idle > 0 {
		deadline = time.Now().Add(l.idle)
	}
	err := conn.SetReadDeadline(deadline)
	if err == nil {
		err = wait()
	}
	l.mu.Lock()
	_, mine := l.watching[conn] // (false: Close closed it)
	delete(l.watching, conn)
	l.mu.Unlock()
	if err == nil {
		err = conn.SetReadDeadline(time.Time{}) // net/http sets its own
	}
	if err != nil || !mine {
		conn.Close()
		return
	}
	l.reused.Add(1) // (its client sent another request: counted before the server can answer it)
	select {
	case l.ready <- conn:
	case <-l.done:
		conn.Close()
	}
}

type listenerKey struct{}

// ConnContext is an http.Server's ConnContext that lets every request find the Listener
// (FromContext). Both of the server's listeners' connections need it: a connection accepted
// by the server's own listener is the one a handler may hand back first.
func (l *Listener) ConnContext(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, listenerKey{}, l)
}

// FromContext returns the Listener a request's connection can be handed back to, or nil when
// its server has none (a response whose connection is taken over must then close it).
func FromContext(ctx context.Context) *Listener {
	l, _ := ctx.Value(listenerKey{}).(*Listener)
	return l
}

// For returns the Listener r's connection goes back to once a response taken over from the
// server is complete: FromContext's, unless r asked to close the connection (Connection:
// close, or HTTP/1.0 without keep-alive). nil: the response must say Connection: close.
func For(r *http.Request) *Listener {
	if r.Close {
		return nil
	}
	return FromContext(r.Context())
}

// Hijacked returns l when the connection a handler took over with http.Hijacker can carry
// the client's next request, given the reader Hijack returned: nil when that reader holds
// bytes past the request (a client that pipelined; they are not served, and the connection
// is closed at the response's end). Hijacked and Return may be called on a nil Listener.
func (l *Listener) Hijacked(brw *bufio.ReadWriter) *Listener {
	if brw != nil && brw.Reader.Buffered() > 0 {
		return nil
	}
	return l
}
