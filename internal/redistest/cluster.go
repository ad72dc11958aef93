package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Node is one redis-server process of a Cluster or a Sentinel setup (a data node or a
// sentinel). Unlike Server it does not hold a testing.TB, so one topology can be shared by
// every test of a package (SharedCluster, SharedSentinel). Its methods are safe for
// concurrent use.
type Node struct {
	bin  string
	argv func(port int) []string // the command line, given the node's port
	port int
	dir  string
	pong bool // start waits for PONG (data loaded), not just any reply

	mu   sync.Mutex
	cmd  *exec.Cmd
	wait chan error
}

// Addr returns "127.0.0.1:<port>".
func (n *Node) Addr() string { return "127.0.0.1:" + strconv.Itoa(n.port) }

// Dir returns the node's data directory.
func (n *Node) Dir() string { return n.dir }

// Running reports whether the process is up (it may still be loading).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil
}

func (n *Node) start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return nil
	}
	cmd := exec.Command(n.bin, n.argv(n.port)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	wait := make(chan error, 1)
	go func() { wait <- cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-wait:
			return fmt.Errorf("redis-server on %s exited at start (%v); log: %s", n.Addr(), err, n.logTail())
		default:
		}
		if ping(n.Addr(), n.pong) == nil {
			n.cmd, n.wait = cmd, wait
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Kill()
	<-wait
	return fmt.Errorf("redis-server on %s did not answer PING within 10s; log: %s", n.Addr(), n.logTail())
}

// Kill crashes the node (SIGKILL) and waits for it to exit; a killed node stays down until
// Restart.
func (n *Node) Kill() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return
	}
	n.cmd.Process.Signal(syscall.SIGCONT) // a stopped process still dies on SIGKILL, but be tidy
	n.cmd.Process.Kill()
	<-n.wait
	n.cmd = nil
}

// Stop freezes the node (SIGSTOP); Continue resumes it. Both do nothing to a node that is
// down.
func (n *Node) Stop() { n.signal(syscall.SIGSTOP) }

// Continue resumes a node frozen by Stop.
func (n *Node) Continue() { n.signal(syscall.SIGCONT) }

func (n *Node) signal(sig syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return errors.New("not running")
	}
	return n.cmd.Process.Signal(sig)
}

// Restart starts a killed node again on the same port and directory (a cluster node keeps its
// identity in nodes.conf and rejoins; a data node of a Sentinel setup is reconfigured as a
// replica by the sentinels).
func (n *Node) Restart() error {
	var err error
	for range 50 { // the port may linger briefly after a kill
		if err = n.start(); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

func (n *Node) logTail() string {
	b, _ := os.ReadFile(filepath.Join(n.dir, "redis.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// ping sends an inline PING over a fresh connection. With pong it wants +PONG; without, it
// also accepts an error reply such as -LOADING or -MASTERDOWN: the process is up and speaking
// RESP.
func ping(addr string, pong bool) error {
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
	if line != "+PONG\r\n" && (pong || line[0] != '-') {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// freePorts returns n distinct free loopback ports (listeners are held until all are found).
func freePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func lookRedis() (string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", errors.New(InstallHint)
	}
	return bin, nil
}

// baseArgs are the arguments of every data node: loopback, no persistence, log in dir.
func baseArgs(port int, dir string) []string {
	return []string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"), "--protected-mode", "no",
	}
}

// Cluster is a local Redis Cluster: Masters master nodes, each with one replica, slots spread
// evenly, formed with `redis-cli --cluster create --cluster-replicas 1`. cluster-node-timeout
// is 1 s, so a killed master is replaced by its replica within a few seconds.
type Cluster struct {
	Nodes []*Node // masters first, then replicas, as passed to redis-cli (it pairs them)
	root  string
}

// ClusterNodeTimeout is the cluster-node-timeout of clusters started by this package.
const ClusterNodeTimeout = time.Second

// NewCluster starts a cluster of masters masters plus as many replicas (at least 3 masters;
// redis-cli refuses fewer). The caller must Close it; tests use StartCluster or
// SharedCluster instead.
func NewCluster(masters int) (*Cluster, error) {
	bin, err := lookRedis()
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "redistest-cluster-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{root: root}
	var lastErr error
	for range 3 { // another process may grab a free port between probe and bind
		if lastErr = c.startNodes(bin, 2*masters); lastErr == nil {
			break
		}
		c.killAll()
		c.Nodes = nil
	}
	if lastErr != nil {
		c.Close()
		return nil, lastErr
	}
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr()
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		c.Close()
		return nil, fmt.Errorf("redis-cli --cluster create: %v: %s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitHealthy(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) startNodes(bin string, n int) error {
	ports, err := freePorts(2 * n)
	if err != nil {
		return err
	}
	for i := range n {
		dir := filepath.Join(c.root, fmt.Sprintf("node%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		busPort := ports[n+i]
		node := &Node{bin: bin, port: ports[i], dir: dir, argv: func(port int) []string {
			return append(baseArgs(port, dir),
				"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
				"--cluster-port", strconv.Itoa(busPort),
				"--cluster-node-timeout", strconv.Itoa(int(ClusterNodeTimeout/time.Millisecond)),
				"--cluster-replica-validity-factor", "0", // a replica may always take over (tests kill masters)
				"--cluster-allow-reads-when-down", "no")
		}}
		c.Nodes = append(c.Nodes, node)
		if err := node.start(); err != nil {
			return err
		}
	}
	return nil
}

// StartCluster starts a 3-master, 3-replica cluster that t.Cleanup closes.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	c, err := NewCluster(3)
	if err != nil {
		t.Fatalf("redistest: starting a cluster: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

var shared struct {
	mu       sync.Mutex
	cluster  *Cluster
	sentinel *Sentinel
}

// SharedCluster returns the package's one 3+3 cluster, started by the first caller; a test
// package that uses it must run its tests through Main, which closes it. Tests that kill
// nodes use StartCluster instead. Tests sharing it keep apart by key prefix.
func SharedCluster(t testing.TB) *Cluster {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.cluster == nil {
		c, err := NewCluster(3)
		if err != nil {
			t.Fatalf("redistest: starting the shared cluster: %v", err)
		}
		shared.cluster = c
	}
	return shared.cluster
}

// Main runs a test package's tests (call it from TestMain) and then stops the topologies
// SharedCluster and SharedSentinel started.
func Main(m *testing.M) int {
	code := m.Run()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.cluster != nil {
		shared.cluster.Close()
	}
	if shared.sentinel != nil {
		shared.sentinel.Close()
	}
	return code
}

// Addrs returns every node's address (seed addresses for a cluster client).
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr()
	}
	return out
}

// Client returns a cluster client seeded with every node that reloads its slot map every
// second while in use (go-redis's default, a minute, would keep a killed master's slots on it);
// the caller closes it.
func (c *Cluster) Client() *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ClusterStateReloadInterval: time.Second})
}

// nodeInfo is one line of CLUSTER NODES.
type nodeInfo struct {
	id, addr, role string
	masterID       string
	failed         bool
	slots          []string
}

func clusterNodes(ctx context.Context, addr string) ([]nodeInfo, error) {
	cl := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer cl.Close()
	text, err := cl.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, err
	}
	var out []nodeInfo
	for line := range strings.SplitSeq(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		ni := nodeInfo{id: f[0], addr: strings.SplitN(f[1], "@", 2)[0], masterID: f[3], slots: f[8:]}
		flags := f[2]
		switch {
		case strings.Contains(flags, "master"):
			ni.role = "master"
		case strings.Contains(flags, "slave"):
			ni.role = "replica"
		}
		ni.failed = strings.Contains(flags, "fail") || f[7] != "connected"
		out = append(out, ni)
	}
	return out, nil
}

// Masters returns the running nodes that are masters owning slots, as their peers see them.
func (c *Cluster) Masters(ctx context.Context) ([]*Node, error) {
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		infos, err := clusterNodes(ctx, n.Addr())
		if err != nil {
			continue
		}
		var out []*Node
		for _, ni := range infos {
			if ni.role == "master" && !ni.failed && len(ni.slots) > 0 {
				if node := c.byAddr(ni.addr); node != nil && node.Running() {
					out = append(out, node)
				}
			}
		}
		return out, nil
	}
	return nil, errors.New("redistest: no cluster node answers")
}

func (c *Cluster) byAddr(addr string) *Node {
	for _, n := range c.Nodes {
		if n.Addr() == addr {
			return n
		}
	}
	return nil
}

// MasterOf returns the node whose slots hold key, as the cluster currently sees it.
func (c *Cluster) MasterOf(ctx context.Context, key string) (*Node, error) {
	cl := c.Client()
	defer cl.Close()
	m, err := cl.MasterForKey(ctx, key)
	if err != nil {
		return nil, err
	}
	n := c.byAddr(m.Options().Addr)
	if n == nil {
		return nil, fmt.Errorf("redistest: master %s of %q is not a node of this cluster", m.Options().Addr, key)
	}
	return n, nil
}

// WaitHealthy waits until every running node reports cluster_state:ok, all 16384 slots are
// served by a running master, and every running replica has finished its sync.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	var last error
	for {
		if last = c.healthy(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redistest: cluster not healthy: %v", last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Cluster) healthy(ctx context.Context) error {
	running := 0
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		running++
		cl := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
		info, err := cl.ClusterInfo(ctx).Result()
		var repl string
		if err == nil {
			repl, err = cl.Info(ctx, "replication").Result()
		}
		cl.Close()
		if err != nil {
			return fmt.Errorf("%s: %v", n.Addr(), err)
		}
		if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_ok:16384") {
			return fmt.Errorf("%s: cluster state not ok", n.Addr())
		}
		if !strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(len(c.Nodes))) {
			return fmt.Errorf("%s: does not know every node yet", n.Addr())
		}
		if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
			return fmt.Errorf("%s: replica not in sync", n.Addr())
		}
	}
	infos, err := clusterNodes(ctx, c.firstRunning().Addr())
	if err != nil {
		return err
	}
	for _, ni := range infos {
		n := c.byAddr(ni.addr)
		if ni.role == "master" && len(ni.slots) > 0 && (ni.failed || n == nil || !n.Running()) {
			return fmt.Errorf("master %s still serves slots while down", ni.addr)
		}
		if n != nil && n.Running() && ni.failed {
			return fmt.Errorf("node %s still flagged failed", ni.addr)
		}
	}
	if running == 0 {
		return errors.New("no node runs")
	}
	return nil
}

func (c *Cluster) firstRunning() *Node {
	for _, n := range c.Nodes {
		if n.Running() {
			return n
		}
	}
	return c.Nodes[0]
}

// MigrateSlot moves slot from its owner to the master dst with CLUSTER SETSLOT
// IMPORTING/MIGRATING, MIGRATE of every key in batches, then SETSLOT NODE on both and on every
// other master: the procedure of `redis-cli --cluster reshard`, done by hand so a test can act
// between steps (before, when given, runs after the slot is marked migrating and before any
// key moves).
func (c *Cluster) MigrateSlot(ctx context.Context, slot int, dst *Node, before func()) error {
	infos, err := clusterNodes(ctx, dst.Addr())
	if err != nil {
		return err
	}
	var srcAddr, srcID, dstID string
	for _, ni := range infos {
		if ni.addr == dst.Addr() {
			dstID = ni.id
		}
		if ni.role != "master" {
			continue
		}
		for _, r := range ni.slots {
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 == nil && err2 == nil && a <= slot && slot <= b {
				srcAddr, srcID = ni.addr, ni.id
			}
		}
	}
	if srcID == "" || dstID == "" {
		return fmt.Errorf("redistest: slot %d owner or node %s not found", slot, dst.Addr())
	}
	if srcID == dstID {
		return nil
	}
	src := redis.NewClient(&redis.Options{Addr: srcAddr})
	defer src.Close()
	dc := redis.NewClient(&redis.Options{Addr: dst.Addr()})
	defer dc.Close()
	if err := dc.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID).Err(); err != nil {
		return err
	}
	if err := src.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID).Err(); err != nil {
		return err
	}
	if before != nil {
		before()
	}
	host, port, _ := net.SplitHostPort(dst.Addr())
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, slot, 100).Result()
		if err != nil {
			return err
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := src.Do(ctx, args...).Err(); err != nil {
			return fmt.Errorf("MIGRATE: %w", err)
		}
	}
	if err := dc.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err(); err != nil {
		return err
	}
	if err := src.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err(); err != nil {
		return err
	}
	return nil
}

// killAll kills every node.
func (c *Cluster) killAll() {
	for _, n := range c.Nodes {
		n.Kill()
	}
}

// Close kills every node and removes their directories.
func (c *Cluster) Close() {
	c.killAll()
	os.RemoveAll(c.root)
}

// Sentinel is a local Sentinel setup: a master, one replica and three sentinels (quorum 2)
// monitoring it as SentinelMaster, with down-after-milliseconds 1000, so a killed master is
// replaced within a few seconds.
type Sentinel struct {
	Data      []*Node // the master as started, then the replica
	Sentinels []*Node
	root      string
}

// SentinelMaster is the name the sentinels monitor.
const SentinelMaster = "mymaster"

// NewSentinel starts the setup and waits until every sentinel knows the replica and the
// other sentinels. The caller must Close it; tests use StartSentinel or SharedSentinel.
func NewSentinel() (*Sentinel, error) {
	bin, err := lookRedis()
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "redistest-sentinel-")
	if err != nil {
		return nil, err
	}
	s := &Sentinel{root: root}
	var lastErr error
	for range 3 {
		if lastErr = s.start(bin); lastErr == nil {
			break
		}
		s.killAll()
		s.Data, s.Sentinels = nil, nil
	}
	if lastErr != nil {
		s.Close()
		return nil, lastErr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.WaitHealthy(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Sentinel) start(bin string) error {
	ports, err := freePorts(5)
	if err != nil {
		return err
	}
	for i := range 2 {
		dir := filepath.Join(s.root, fmt.Sprintf("data%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		masterPort := ports[0]
		replica := i == 1
		n := &Node{bin: bin, port: ports[i], dir: dir, argv: func(port int) []string {
			a := baseArgs(port, dir)
			if replica {
				a = append(a, "--replicaof", "127.0.0.1", strconv.Itoa(masterPort))
			}
			return a
		}}
		s.Data = append(s.Data, n)
		if err := n.start(); err != nil {
			return err
		}
	}
	for i := range 3 {
		dir := filepath.Join(s.root, fmt.Sprintf("sentinel%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		conf := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\nprotected-mode no\ndir %s\nlogfile %s\n"+
			"sentinel monitor %s 127.0.0.1 %d 2\n"+
			"sentinel down-after-milliseconds %s 1000\n"+
			"sentinel failover-timeout %s 5000\n"+
			"sentinel parallel-syncs %s 1\n",
			ports[2+i], dir, filepath.Join(dir, "redis.log"), SentinelMaster, ports[0],
			SentinelMaster, SentinelMaster, SentinelMaster)
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			return err
		}
		n := &Node{bin: bin, port: ports[2+i], dir: dir, argv: func(int) []string { return []string{conf, "--sentinel"} }}
		s.Sentinels = append(s.Sentinels, n)
		if err := n.start(); err != nil {
			return err
		}
	}
	return nil
}

// StartSentinel starts a master + replica + 3 sentinels setup that t.Cleanup closes.
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	s, err := NewSentinel()
	if err != nil {
		t.Fatalf("redistest: starting a sentinel setup: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// SharedSentinel returns the package's one Sentinel setup (see SharedCluster).
func SharedSentinel(t testing.TB) *Sentinel {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.sentinel == nil {
		s, err := NewSentinel()
		if err != nil {
			t.Fatalf("redistest: starting the shared sentinel setup: %v", err)
		}
		shared.sentinel = s
	}
	return shared.sentinel
}

// SentinelAddrs returns the sentinels' addresses.
func (s *Sentinel) SentinelAddrs() []string {
	out := make([]string, len(s.Sentinels))
	for i, n := range s.Sentinels {
		out[i] = n.Addr()
	}
	return out
}

// Master returns the data node the sentinels currently name as master.
func (s *Sentinel) Master(ctx context.Context) (*Node, error) {
	var last error
	for _, sn := range s.Sentinels {
		if !sn.Running() {
			continue
		}
		c := redis.NewSentinelClient(&redis.Options{Addr: sn.Addr(), MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
		addr, err := c.GetMasterAddrByName(ctx, SentinelMaster).Result()
		c.Close()
		if err != nil {
			last = err
			continue
		}
		hp := net.JoinHostPort(addr[0], addr[1])
		for _, n := range s.Data {
			if n.Addr() == hp {
				return n, nil
			}
		}
		return nil, fmt.Errorf("redistest: sentinels name %s, not a data node", hp)
	}
	return nil, fmt.Errorf("redistest: no sentinel answers: %v", last)
}

// WaitHealthy waits until every running sentinel agrees on a running master that has a
// connected, synced replica, and knows the other running sentinels.
func (s *Sentinel) WaitHealthy(ctx context.Context) error {
	var last error
	for {
		if last = s.healthy(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redistest: sentinel setup not healthy: %v", last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *Sentinel) healthy(ctx context.Context) error {
	running := 0
	for _, sn := range s.Sentinels {
		if sn.Running() {
			running++
		}
	}
	var master string
	for _, sn := range s.Sentinels {
		if !sn.Running() {
			continue
		}
		c := redis.NewSentinelClient(&redis.Options{Addr: sn.Addr(), MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
		m, err := c.Master(ctx, SentinelMaster).Result()
		c.Close()
		if err != nil {
			return fmt.Errorf("sentinel %s: %v", sn.Addr(), err)
		}
		addr := net.JoinHostPort(m["ip"], m["port"])
		if master == "" {
			master = addr
		} else if master != addr {
			return fmt.Errorf("sentinels disagree: %s vs %s", master, addr)
		}
		if strings.Contains(m["flags"], "down") {
			return fmt.Errorf("sentinel %s sees master %s down", sn.Addr(), addr)
		}
		if m["num-slaves"] != "1" || m["num-other-sentinels"] != strconv.Itoa(running-1) {
			return fmt.Errorf("sentinel %s: %s replicas, %s other sentinels", sn.Addr(), m["num-slaves"], m["num-other-sentinels"])
		}
	}
	for _, n := range s.Data {
		if !n.Running() {
			continue
		}
		c := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
		repl, err := c.Info(ctx, "replication").Result()
		c.Close()
		if err != nil {
			return fmt.Errorf("%s: %v", n.Addr(), err)
		}
		isMaster := n.Addr() == master
		switch {
		case isMaster && !strings.Contains(repl, "role:master"):
			return fmt.Errorf("%s: named master but %s", n.Addr(), firstLine(repl, "role:"))
		case isMaster && !strings.Contains(repl, "connected_slaves:1"):
			return fmt.Errorf("%s: master without its replica", n.Addr())
		case !isMaster && (!strings.Contains(repl, "role:slave") || !strings.Contains(repl, "master_link_status:up") ||
			!strings.Contains(repl, "master_port:"+strings.SplitN(master, ":", 2)[1])):
			return fmt.Errorf("%s: replica not in sync with %s", n.Addr(), master)
		}
	}
	return nil
}

func firstLine(text, prefix string) string {
	for line := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(line, prefix) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

func (s *Sentinel) killAll() {
	for _, n := range append(append([]*Node{}, s.Sentinels...), s.Data...) {
		n.Kill()
	}
}

// Close kills every process and removes their directories.
func (s *Sentinel) Close() {
	s.killAll()
	os.RemoveAll(s.root)
}
