package recorder

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// MemoryThreadCount reports how many threads s holds in memory, expired ones included.
func MemoryThreadCount(s *MemoryStore) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.threads)
}

// IndexTag exposes the hash naming an owner's thread index on a route.
var IndexTag = indexTag

// AddRedisHook adds h to both of s's command pools (the writer's and the reader's).
func AddRedisHook(s *RedisStore, h redis.Hook) {
	s.w.AddHook(h)
	s.r.AddHook(h)
}

// AppendBySlot makes s group its appends by slot as on Cluster (one append.lua call per slot).
func AppendBySlot(s *RedisStore) { s.appendBySlot = true }

// KeySlot is keySlot for tests.
func KeySlot(k string) uint16 { return keySlot(k) }

// ScriptSHAs returns the SHA1 of every Lua script of the store, by file name.
func ScriptSHAs() map[string]string {
	return map[string]string{
		"create_run.lua": createRunScript.Hash(), "append.lua": appendScript.Hash(),
		"finish_run.lua": finishRunScript.Hash(), "delete_run.lua": deleteRunScript.Hash(),
		"put_checkpoint.lua": putCheckpointScript.Hash(), "lease.lua": leaseScript.Hash(),
		"stop.lua": stopScript.Hash(), "delete_thread.lua": deleteThreadScript.Hash(),
	}
}

// FinishRuns is RedisStore.finishRuns for tests: fs[i] is {threadID, runID, status, lastSeq}.
func FinishRuns(s *RedisStore, fs [][4]string) []error {
	reqs := make([]finishReq, len(fs))
	for i, f := range fs {
		var last int64
		fmt.Sscan(f[3], &last)
		reqs[i] = finishReq{threadID: f[0], runID: f[1], status: RunStatus(f[2]), lastSeq: last}
	}
	return s.finishRuns(context.Background(), reqs)
}
