package redistest

import (
	"bytes"
	"net"
	"sync"
	"testing"
)

// Mode is what a FaultProxy does with the bytes it carries.
type Mode int

const (
	// Pass forwards everything both ways.
	Pass Mode = iota
	// Blackhole accepts connections and discards every byte in both directions: the peer sees
	// a server that never answers.
	Blackhole
	// DropNextReply forwards requests, but the first time a reply follows a request holding
	// XADD or EVALSHA it closes the client's connection instead of forwarding that reply, then
	// goes back to Pass. The server executed the command; the client saw EOF. This reproduces
	// go-redis re-sending a write whose reply was lost.
	DropNextReply
)

// FaultProxy is an in-test TCP forwarder on 127.0.0.1 with switchable faults.
type FaultProxy struct {
	target string
	ln     net.Listener

	mu      sync.Mutex
	mode    Mode
	dropped int
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
}

// NewFaultProxy listens on a free loopback port and forwards to target; it is closed in
// t.Cleanup.
func NewFaultProxy(t testing.TB, target string) *FaultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: fault proxy listen: %v", err)
	}
	p := &FaultProxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr returns the proxy's address.
func (p *FaultProxy) Addr() string { return p.ln.Addr().String() }

// URL returns a redis:// URL for the proxy.
func (p *FaultProxy) URL() string { return "redis://" + p.Addr() + "/0" }

// SetMode switches the fault mode for every connection, open or new.
func (p *FaultProxy) SetMode(m Mode) {
	p.mu.Lock()
	p.mode = m
	p.mu.Unlock()
}

// Mode returns the current mode (DropNextReply turns back into Pass once it fired).
func (p *FaultProxy) Mode() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// Dropped returns how many replies DropNextReply has dropped.
func (p *FaultProxy) Dropped() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped
}

// Close stops accepting, closes every connection and waits for the forwarding goroutines.
func (p *FaultProxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil // later connections are refused by track
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *FaultProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *FaultProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		if !p.track(client) || !p.track(server) {
			client.Close()
			server.Close()
			return
		}
		pc := &proxyConn{p: p, client: client, server: server}
		p.wg.Add(2)
		go pc.requests()
		go pc.replies()
	}
}

// proxyConn is one client connection and its server connection.
type proxyConn struct {
	p              *FaultProxy
	client, server net.Conn

	mu    sync.Mutex
	armed bool // a request holding XADD or EVALSHA went out since the last reply
}

func (c *proxyConn) close() {
	c.client.Close()
	c.server.Close()
	c.p.mu.Lock()
	if c.p.conns != nil {
		delete(c.p.conns, c.client)
		delete(c.p.conns, c.server)
	}
	c.p.mu.Unlock()
}

var (
	xadd    = []byte("xadd")
	evalsha = []byte("evalsha")
)

// requests copies client → server.
func (c *proxyConn) requests() {
	defer c.p.wg.Done()
	defer c.close()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.client.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			if c.p.Mode() != Blackhole {
				lower := bytes.ToLower(chunk)
				if bytes.Contains(lower, xadd) || bytes.Contains(lower, evalsha) {
					c.mu.Lock()
					c.armed = true
					c.mu.Unlock()
				}
				if _, werr := c.server.Write(chunk); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// replies copies server → client, applying the fault mode.
func (c *proxyConn) replies() {
	defer c.p.wg.Done()
	defer c.close()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.server.Read(buf)
		if n > 0 {
			c.p.mu.Lock()
			mode := c.p.mode
			c.mu.Lock()
			drop := mode == DropNextReply && c.armed
			c.armed = false
			c.mu.Unlock()
			if drop {
				c.p.mode = Pass
				c.p.dropped++
			}
			c.p.mu.Unlock()
			switch {
			case drop:
				return // closes both sides: the reply is lost
			case mode == Blackhole:
			default:
				if _, werr := c.client.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return // EOF or closed: close() ends the other direction too
		}
	}
}
