package recorder

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Topology is how a RedisStore reaches Redis.
type Topology int

const (
	// TopologySingle is one Redis server (RedisConfig.URL or Options), possibly a managed
	// endpoint that fails over behind one address.
	TopologySingle Topology = iota
	// TopologyCluster is Redis Cluster reached through seed addresses (RedisConfig.ClusterAddrs).
	TopologyCluster
	// TopologySentinel is a master found through Redis Sentinel (RedisConfig.SentinelAddrs and
	// SentinelMaster).
	TopologySentinel
)

// String returns "single", "cluster" or "sentinel".
func (t Topology) String() string {
	switch t {
	case TopologyCluster:
		return "cluster"
	case TopologySentinel:
		return "sentinel"
	}
	return "single"
}

// DefaultClusterStateReload is how old a Cluster client's slot map may get before the next
// command reloads it in the background. go-redis's own default (60 s) would keep sending a
// dead master's slots to it for a minute after its replica took over; MOVED replies and
// errors also trigger a reload at once.
const DefaultClusterStateReload = time.Second

// ErrNotReplicated is returned by Append and FinishRun when RedisConfig.WaitReplicas is set
// and fewer replicas than that acknowledged the write within WaitTimeout. The write is in
// the master's memory; the Writer retries it (appends are idempotent), and a Sync-durability
// stream waits until it is replicated.
var ErrNotReplicated = errors.New("write not acknowledged by enough replicas")

// DefaultWaitTimeout is RedisConfig.WaitTimeout's default.
const DefaultWaitTimeout = time.Second

// clientSpec is the topology and the connection settings shared by the store's clients.
type clientSpec struct {
	topology Topology
	single   redis.Options // TopologySingle; also carries the shared settings for the others
	cluster  []string
	sentinel []string
	master   string
	sentPass string
	reload   time.Duration
}

// parseTopology checks that exactly one topology is configured and merges the shared
// settings (username, password, TLS, DB) into it.
func parseTopology(cfg RedisConfig) (clientSpec, error) {
	var sp clientSpec
	set := 0
	if cfg.URL != "" || cfg.Options != nil {
		set++
	}
	if len(cfg.ClusterAddrs) > 0 {
		set++
		sp.topology = TopologyCluster
	}
	if len(cfg.SentinelAddrs) > 0 || cfg.SentinelMaster != "" {
		set++
		sp.topology = TopologySentinel
	}
	switch {
	case set == 0:
		return sp, errors.New("recorder: RedisConfig needs a URL, Options, ClusterAddrs or SentinelAddrs")
	case set > 1:
		return sp, errors.New("recorder: RedisConfig sets more than one of URL/Options, ClusterAddrs and SentinelAddrs")
	}
	checkAddrs := func(what string, addrs []string) error {
		for _, a := range addrs {
			if h, p, ok := strings.Cut(a, ":"); !ok || h == "" || p == "" || strings.ContainsAny(a, " /") {
				return fmt.Errorf("recorder: %s: %q is not host:port", what, a)
			}
		}
		return nil
	}
	switch sp.topology {
	case TopologySingle:
		if cfg.Options != nil {
			sp.single = *cfg.Options
			return sp, nil // used as given
		}
		o, err := redis.ParseURL(cfg.URL)
		if err != nil {
			return sp, fmt.Errorf("recorder: parsing redis URL: %w", err)
		}
		sp.single = *o
	case TopologyCluster:
		if err := checkAddrs("ClusterAddrs", cfg.ClusterAddrs); err != nil {
			return sp, err
		}
		if cfg.DB != 0 {
			return sp, fmt.Errorf("recorder: Redis Cluster has only database 0, not %d", cfg.DB)
		}
		sp.cluster = cfg.ClusterAddrs
	case TopologySentinel:
		if cfg.SentinelMaster == "" || len(cfg.SentinelAddrs) == 0 {
			return sp, errors.New("recorder: Sentinel needs both SentinelAddrs and SentinelMaster")
		}
		if err := checkAddrs("SentinelAddrs", cfg.SentinelAddrs); err != nil {
			return sp, err
		}
		sp.sentinel, sp.master, sp.sentPass = cfg.SentinelAddrs, cfg.SentinelMaster, cfg.SentinelPassword
	}
	if cfg.Username != "" {
		sp.single.Username = cfg.Username
	}
	if cfg.Password != "" {
		sp.single.Password = cfg.Password
	}
	if cfg.TLS != nil {
		sp.single.TLSConfig = cfg.TLS
	}
	if cfg.DB != 0 {
		sp.single.DB = cfg.DB
	}
	sp.single.ReadTimeout = DefaultRedisTimeout
	sp.single.WriteTimeout = DefaultRedisTimeout
	sp.single.DialTimeout = DefaultRedisTimeout
	sp.single.MaxRetries = DefaultRedisMaxRetries
	sp.single.PoolTimeout = DefaultRedisPoolTimeout
	sp.single.ContextTimeoutEnabled = true
	sp.single.MinIdleConns = 1
	sp.reload = DefaultClusterStateReload
	return sp, nil
}

// client builds a client of the spec's topology from o (the per-pool options: sizes, retries,
// name). For Cluster, pool sizes are per node.
func (sp clientSpec) client(o redis.Options) redis.UniversalClient {
	switch sp.topology {
	case TopologyCluster:
		return redis.NewClusterClient(sp.clusterOptions(o))
	case TopologySentinel:
		return redis.NewFailoverClient(sp.failoverOptions(o))
	}
	return redis.NewClient(&o)
}

func (sp clientSpec) clusterOptions(o redis.Options) *redis.ClusterOptions {
	return &redis.ClusterOptions{
		Addrs: sp.cluster, ClientName: o.ClientName, Protocol: o.Protocol,
		Username: o.Username, Password: o.Password, TLSConfig: o.TLSConfig,
		MaxRetries: o.MaxRetries, MinRetryBackoff: o.MinRetryBackoff, MaxRetryBackoff: o.MaxRetryBackoff,
		DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
		ContextTimeoutEnabled: o.ContextTimeoutEnabled,
		PoolSize:              o.PoolSize, PoolTimeout: o.PoolTimeout, MinIdleConns: o.MinIdleConns,
		MaxIdleConns: o.MaxIdleConns, MaxActiveConns: o.MaxActiveConns,
		PipelinePoolSize:           o.PipelinePoolSize,
		ClusterStateReloadInterval: sp.reload,
		DisableIdentity:            o.DisableIdentity,
	}
}

func (sp clientSpec) failoverOptions(o redis.Options) *redis.FailoverOptions {
	return &redis.FailoverOptions{
		MasterName: sp.master, SentinelAddrs: sp.sentinel, SentinelPassword: sp.sentPass,
		ClientName: o.ClientName, Protocol: o.Protocol,
		Username: o.Username, Password: o.Password, DB: o.DB, TLSConfig: o.TLSConfig,
		MaxRetries: o.MaxRetries, MinRetryBackoff: o.MinRetryBackoff, MaxRetryBackoff: o.MaxRetryBackoff,
		DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
		ContextTimeoutEnabled: o.ContextTimeoutEnabled,
		PoolSize:              o.PoolSize, PoolTimeout: o.PoolTimeout, MinIdleConns: o.MinIdleConns,
		MaxIdleConns: o.MaxIdleConns, MaxActiveConns: o.MaxActiveConns,
		PipelinePoolSize: o.PipelinePoolSize,
		DisableIdentity:  o.DisableIdentity,
	}
}
