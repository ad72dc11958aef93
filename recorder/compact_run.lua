-- compact_run.lua: replace an ended run's events by their compacted form (compaction at rest),
-- atomically: readers see the raw events or the compacted ones, never neither.
--
-- KEYS[1] run hash      <prefix>:{<threadId>}:run:<runId>
-- KEYS[2] event stream  <prefix>:{<threadId>}:events:<runId>
-- KEYS[3] packed string <prefix>:{<threadId>}:packed:<runId>
-- ARGV[1] the epoch the run must still have   ARGV[2] the new epoch   ARGV[3] now (ms)
-- ARGV[4] the new events, packed (recorder/packed.go)   ARGV[5] their count
--
-- The stream is deleted and the packed events stored in one string with the run's TTL (one
-- value holds less than a stream, whose node Redis allocates at 4 KB, and it is compressed;
-- no string when there is no event).
--
-- Errors (first word is the code the Go side maps to a sentinel):
--   NORUN     the run hash is missing
--   CONFLICT  the run's epoch is not ARGV[1] (compacted or re-created meanwhile) or it runs
-- Returns the number of events stored.
local meta = redis.call('HMGET', KEYS[1], 'epoch', 'status')
if meta[1] == false then
  return redis.error_reply('NORUN run not found')
end
if meta[1] ~= ARGV[1] then
  return redis.error_reply('CONFLICT epoch changed')
end
if meta[2] == 'running' then
  return redis.error_reply('CONFLICT run is running')
end
local ttl = redis.call('PTTL', KEYS[1])
local n = tonumber(ARGV[5])
redis.call('DEL', KEYS[2], KEYS[3])
if n > 0 and ttl > 0 then
  redis.call('SET', KEYS[3], ARGV[4], 'PX', ttl)
elseif n > 0 then
  redis.call('SET', KEYS[3], ARGV[4])
end
redis.call('HSET', KEYS[1], 'epoch', ARGV[2], 'last', n, 'compacted', ARGV[3])
-- What an ended run no longer needs (its lease and node: read only while it runs) and empty
-- fields (read as empty when missing) leave the run hash.
redis.call('HDEL', KEYS[1], 'gaps', 'node', 'lease')
for _, f in ipairs({'detail', 'owner', 'parent'}) do
  if redis.call('HGET', KEYS[1], f) == '' then
    redis.call('HDEL', KEYS[1], f)
  end
end
return n
