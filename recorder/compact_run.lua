-- compact_run.lua: replace an ended run's events by their compacted form (compaction at rest),
-- atomically: readers see the raw events or the compacted ones, never neither.
--
-- KEYS[1] run hash     <prefix>:{<threadId>}:run:<runId>
-- KEYS[2] event stream <prefix>:{<threadId>}:events:<runId>
-- ARGV[1] the epoch the run must still have   ARGV[2] the new epoch   ARGV[3] now (ms)
-- ARGV[4..] type, frame pairs of the new events, seq 1, 2, ... in order
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
redis.call('DEL', KEYS[2])
local n = 0
for i = 4, #ARGV, 2 do
  n = n + 1
  redis.call('XADD', KEYS[2], n .. '-0', 't', ARGV[i], 'f', ARGV[i + 1])
end
redis.call('HSET', KEYS[1], 'epoch', ARGV[2], 'last', n, 'gaps', '', 'compacted', ARGV[3])
if n > 0 then
  -- A stream node is allocated at its full size (4 KB) up front, so a short compacted run
  -- would hold as much memory as a long raw one: rewriting the stream through DUMP and
  -- RESTORE stores its node at its actual size. RESTORE also sets the run's TTL (0: none).
  local dump = redis.call('DUMP', KEYS[2])
  local keep = 0
  if ttl > 0 then keep = ttl end
  redis.call('RESTORE', KEYS[2], keep, dump, 'REPLACE')
end
return n
