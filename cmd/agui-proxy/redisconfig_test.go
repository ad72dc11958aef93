package main

import (
	"strings"
	"testing"
)

// TestRedisTopologyConfig checks the three topologies are read from their variables, the
// shared settings reach each, and conflicting or incomplete settings are refused with the
// variable named.
func TestRedisTopologyConfig(t *testing.T) {
	base := map[string]string{"AGUI_DURABILITY": "sync", "AGUI_REDIS_PASSWORD": "pw", "AGUI_REDIS_USERNAME": "u", "AGUI_REDIS_TLS": "true"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	cases := []struct {
		name  string
		env   map[string]string
		store string
	}{
		{"url", with("AGUI_REDIS_URL", "redis://h:6379/0", "AGUI_REDIS_DB", "3"), "redis"},
		{"cluster", with("AGUI_REDIS_CLUSTER_ADDRS", "a:7000, b:7001,c:7002", "AGUI_REDIS_WAIT_REPLICAS", "1"), "redis-cluster"},
		{"sentinel", with("AGUI_REDIS_SENTINEL_ADDRS", "s1:26379,s2:26379", "AGUI_REDIS_SENTINEL_MASTER", "mymaster", "AGUI_REDIS_SENTINEL_PASSWORD", "spw"), "redis-sentinel"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := loadConfig(tc.env)
			if err != nil {
				t.Fatal(err)
			}
			rc, err := cfg.redisConfig()
			if err != nil {
				t.Fatal(err)
			}
			if got := storeName(cfg); got != tc.store {
				t.Errorf("storeName = %q, want %q", got, tc.store)
			}
			if rc.Username != "u" || rc.Password != "pw" || rc.TLS == nil {
				t.Errorf("shared settings not passed: %+v", rc)
			}
			switch tc.name {
			case "url":
				if rc.URL != "redis://h:6379/0" || rc.DB != 3 {
					t.Errorf("URL config = %+v", rc)
				}
			case "cluster":
				if strings.Join(rc.ClusterAddrs, " ") != "a:7000 b:7001 c:7002" || rc.WaitReplicas != 1 {
					t.Errorf("cluster config = %+v", rc)
				}
			case "sentinel":
				if len(rc.SentinelAddrs) != 2 || rc.SentinelMaster != "mymaster" || rc.SentinelPassword != "spw" {
					t.Errorf("sentinel config = %+v", rc)
				}
			}
		})
	}
	bad := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"AGUI_REDIS_URL": "redis://h", "AGUI_REDIS_CLUSTER_ADDRS": "a:1"}, "set only one"},
		{map[string]string{"AGUI_REDIS_SENTINEL_ADDRS": "a:1"}, "AGUI_REDIS_SENTINEL_MASTER"},
		{map[string]string{"AGUI_REDIS_CLUSTER_ADDRS": "a:1,nonsense"}, "AGUI_REDIS_CLUSTER_ADDRS"},
		{map[string]string{"AGUI_REDIS_CLUSTER_ADDRS": "a:1", "AGUI_REDIS_DB": "2"}, "AGUI_REDIS_DB"},
		{map[string]string{"AGUI_REDIS_URL": "redis://h", "AGUI_REDIS_WAIT_REPLICAS": "1"}, "AGUI_DURABILITY=sync"},
		{map[string]string{"AGUI_REDIS_URL": "redis://h", "AGUI_REDIS_TLS_CA_FILE": "/nonexistent"}, "AGUI_REDIS_TLS_CA_FILE"},
	}
	for _, b := range bad {
		_, err := loadConfig(b.env)
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("loadConfig(%v) = %v, want an error naming %s", b.env, err, b.want)
		}
	}
	if cfg, err := loadConfig(map[string]string{}); err != nil || cfg.redisEnabled() || storeName(cfg) != "memory" {
		t.Errorf("empty environment: %v, redis enabled %v", err, cfg.redisEnabled())
	}
}
