package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/agui-proxy/agui-proxy/recorder"
)

// redisEnabled reports whether any Redis topology is configured.
func (c config) redisEnabled() bool {
	return c.RedisURL != "" || c.RedisClusterAddrs != "" || c.RedisSentinelAddrs != "" || c.RedisSentinelMaster != ""
}

// redisConfig turns the AGUI_REDIS_* variables into the store's configuration (without the
// logger), checking that at most one topology is chosen. With no topology it returns a zero
// config and no error (the memory store).
func (c config) redisConfig() (recorder.RedisConfig, error) {
	rc := recorder.RedisConfig{
		URL: c.RedisURL, Prefix: c.RedisPrefix, TTL: c.RetentionTTL, MaxEventsPerRun: c.RetentionMaxEvents,
		SentinelMaster: c.RedisSentinelMaster, SentinelPassword: c.RedisSentinelPassword,
		Username: c.RedisUsername, Password: c.RedisPassword, DB: c.RedisDB,
		WaitTimeout: c.RedisWaitTimeout,
	}
	if !c.redisEnabled() {
		return rc, nil
	}
	var errs []error
	addrs := func(name, v string) []string {
		var out []string
		for a := range strings.SplitSeq(v, ",") {
			if a = strings.TrimSpace(a); a == "" {
				continue
			}
			if h, p, ok := strings.Cut(a, ":"); !ok || h == "" || p == "" || strings.ContainsAny(a, " /") {
				errs = append(errs, fmt.Errorf("%s: %q is not host:port", name, a))
				continue
			}
			out = append(out, a)
		}
		return out
	}
	rc.ClusterAddrs = addrs("AGUI_REDIS_CLUSTER_ADDRS", c.RedisClusterAddrs)
	rc.SentinelAddrs = addrs("AGUI_REDIS_SENTINEL_ADDRS", c.RedisSentinelAddrs)
	chosen := 0
	for _, set := range []bool{c.RedisURL != "", c.RedisClusterAddrs != "", c.RedisSentinelAddrs != "" || c.RedisSentinelMaster != ""} {
		if set {
			chosen++
		}
	}
	if chosen > 1 {
		errs = append(errs, errors.New("AGUI_REDIS_URL, AGUI_REDIS_CLUSTER_ADDRS and AGUI_REDIS_SENTINEL_ADDRS: set only one"))
	}
	if (c.RedisSentinelAddrs == "") != (c.RedisSentinelMaster == "") {
		errs = append(errs, errors.New("AGUI_REDIS_SENTINEL_ADDRS and AGUI_REDIS_SENTINEL_MASTER go together"))
	}
	if c.RedisDB < 0 || (c.RedisDB != 0 && c.RedisClusterAddrs != "") {
		errs = append(errs, fmt.Errorf("AGUI_REDIS_DB %d: must be 0 or more, and 0 on Redis Cluster", c.RedisDB))
	}
	if c.RedisWaitReplicas < 0 || c.RedisWaitTimeout <= 0 {
		errs = append(errs, fmt.Errorf("AGUI_REDIS_WAIT_REPLICAS %d must not be negative and AGUI_REDIS_WAIT_TIMEOUT %v must be positive", c.RedisWaitReplicas, c.RedisWaitTimeout))
	}
	if c.RedisWaitReplicas > 0 && c.Durability != "sync" {
		errs = append(errs, errors.New("AGUI_REDIS_WAIT_REPLICAS needs AGUI_DURABILITY=sync (in async mode clients see events before any store acknowledges them)"))
	}
	rc.WaitReplicas = c.RedisWaitReplicas
	if c.RedisTLS || c.RedisTLSCA != "" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if c.RedisTLSCA != "" {
			pem, err := os.ReadFile(c.RedisTLSCA)
			pool := x509.NewCertPool()
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("AGUI_REDIS_TLS_CA_FILE: %w", err))
			case !pool.AppendCertsFromPEM(pem):
				errs = append(errs, fmt.Errorf("AGUI_REDIS_TLS_CA_FILE %s holds no PEM certificate", c.RedisTLSCA))
			}
			tc.RootCAs = pool
		}
		rc.TLS = tc
	}
	return rc, errors.Join(errs...)
}
