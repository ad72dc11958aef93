package recorder

import (
	"context"
	"time"

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
		"write_checkpoints.lua": writeCkptsScript.Hash(), "lease.lua": leaseScript.Hash(),
		"stop.lua": stopScript.Hash(), "delete_thread.lua": deleteThreadScript.Hash(),
	}
}

// FinishSpec is one run's finish for AppendFinish.
type FinishSpec struct {
	Status  RunStatus
	Detail  string
	LastSeq int64
}

// AppendFinish is RedisStore.appendFinish for tests: fins[i], when not nil, finishes
// batches[i]'s run.
func AppendFinish(ctx context.Context, s *RedisStore, batches []Batch, fins []*FinishSpec) error {
	var ops []*finishOp
	for _, f := range fins {
		if f == nil {
			ops = append(ops, nil)
			continue
		}
		ops = append(ops, &finishOp{status: f.Status, detail: f.Detail, lastSeq: f.LastSeq})
	}
	return s.appendFinish(ctx, batches, ops, nil, nil)
}

// AppendLeased is RedisStore.appendFinish with a lease for tests: it returns, per batch, 0
// when its run's lease was not renewed, 1 when it was, 2 when it was and the run was asked
// to stop.
func AppendLeased(ctx context.Context, s *RedisStore, batches []Batch, node string, until time.Time) ([]int, error) {
	out := make([]appendOutcome, len(batches))
	if err := s.appendFinish(ctx, batches, nil, &appendLease{node: node, untilMs: leaseMs(until)}, out); err != nil {
		return nil, err
	}
	res := make([]int, len(out))
	for i, o := range out {
		res[i] = int(o)
	}
	return res, nil
}

// CoalescerSenders reports how many pipelines s's coalescer has in flight (inline ones
// included).
func CoalescerSenders(s *RedisStore) int {
	s.co.mu.Lock()
	defer s.co.mu.Unlock()
	return s.co.senders
}
