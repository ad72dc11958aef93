package recorder

import (
	"errors"
	"fmt"
	"strings"

	"github.com/agui-proxy/agui-proxy/agui"
)

// DefaultPrefix is the key prefix a RedisStore uses when RedisConfig.Prefix is empty.
const DefaultPrefix = "agui"

// ErrInvalidPrefix is returned by NewRedisStore for a key prefix that could break the key
// template: it holds '{', '}', whitespace or a control character, or is longer than 64 bytes.
var ErrInvalidPrefix = errors.New("invalid key prefix")

// Key kinds. Each appears right after the thread's hash tag, so no kind can be mistaken for
// another ("run:" + "events:x" is not "events:" + "x").
const (
	kindThread     = "thread"     // hash: owner, route, created
	kindRuns       = "runs"       // list of run ids in creation order
	kindRun        = "run"        // hash: the run's metadata
	kindEvents     = "events"     // stream: entries of one or more events, id "<last seq>-0" (redis_entry.go)
	kindCheckpoint = "checkpoint" // string: the run's checkpoint
	kindPacked     = "packed"     // string: a run compacted at rest, its events packed (packed.go)
)

// validatePrefix checks a key prefix.
func validatePrefix(p string) error {
	if p == "" || len(p) > 64 {
		return fmt.Errorf("prefix %q must be 1 to 64 bytes: %w", p, ErrInvalidPrefix)
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c == '{' || c == '}' || c <= ' ' || c == 0x7f {
			return fmt.Errorf("prefix %q has a forbidden byte at offset %d: %w", p, i, ErrInvalidPrefix)
		}
	}
	return nil
}

// threadBase returns "<prefix>:{<threadKey>}:", the part every key of the thread starts with.
// The thread key (ThreadKey) is the whole Redis Cluster hash tag, so all of a thread's keys live in one
// slot and a Lua script may touch them together. Lua scripts that reach the keys of other runs
// (the TTL refresh in create_run.lua and finish_run.lua) receive this base as an argument and
// append "run:", "events:", "checkpoint:" or "packed:" plus a run id exactly as key does.
func threadBase(prefix, threadID string) string {
	return prefix + ":{" + threadID + "}:"
}

// key is the ONE place a Redis key is built. threadID must have passed validateThreadKey and
// runID agui.ValidateID (see keysFor): neither admits '{' or '}', so the hash tag is exactly
// the thread key, and since the kind follows the closing brace and the run id is last,
// two distinct (thread, kind, run) triples can never produce the same key.
func key(prefix, threadID, kind, runID string) string {
	// One concatenation, one allocation: threadBase(prefix, threadID) + kind [+ ":" + runID].
	if runID == "" {
		return prefix + ":{" + threadID + "}:" + kind
	}
	return prefix + ":{" + threadID + "}:" + kind + ":" + runID
}

// runKeys are the keys of one run and of its thread.
type runKeys struct {
	base, thread, runs, run, events, checkpoint, packed string
}

// threadKeys validates the thread key and returns the thread-level keys (run keys empty).
func threadKeys(prefix, threadID string) (runKeys, error) {
	if err := validateThreadKey(threadID); err != nil {
		return runKeys{}, err
	}
	return runKeys{
		base:   threadBase(prefix, threadID),
		thread: key(prefix, threadID, kindThread, ""),
		runs:   key(prefix, threadID, kindRuns, ""),
	}, nil
}

// keysFor validates both ids and returns the keys of the run and its thread.
func keysFor(prefix, threadID, runID string) (runKeys, error) {
	k, err := threadKeys(prefix, threadID)
	if err != nil {
		return runKeys{}, err
	}
	if err := agui.ValidateID("runId", runID); err != nil {
		return runKeys{}, err
	}
	k.run = key(prefix, threadID, kindRun, runID)
	k.events = key(prefix, threadID, kindEvents, runID)
	k.checkpoint = key(prefix, threadID, kindCheckpoint, runID)
	k.packed = key(prefix, threadID, kindPacked, runID)
	return k, nil
}

// hashTag returns the part of k that Redis Cluster hashes: the text between the first '{' and
// the first '}' after it, or all of k when there is no such non-empty section.
func hashTag(k string) string {
	i := strings.IndexByte(k, '{')
	if i < 0 {
		return k
	}
	j := strings.IndexByte(k[i+1:], '}')
	if j <= 0 {
		return k
	}
	return k[i+1 : i+1+j]
}

// ErrInvalidEpoch is returned for a Run whose Epoch is not a value made by NewEpoch.
var ErrInvalidEpoch = errors.New("invalid epoch")

// keySlot returns the Redis Cluster hash slot of k: CRC16 (XMODEM) of its hash tag, modulo
// 16384, as Redis computes it.
func keySlot(k string) uint16 {
	var crc uint16
	tag := hashTag(k)
	for i := 0; i < len(tag); i++ {
		crc ^= uint16(tag[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}
