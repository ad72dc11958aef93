-- finish_run.lua: set a run's final status and record a missing tail as a gap.
--
-- KEYS[1] thread hash    <prefix>:{<threadId>}:thread
-- KEYS[2] runs list      <prefix>:{<threadId>}:runs
-- KEYS[3] run hash       <prefix>:{<threadId>}:run:<runId>
-- KEYS[4] events stream  <prefix>:{<threadId>}:events:<runId>
-- ARGV[1] status   ARGV[2] detail   ARGV[3] lastSeq (the seq of the run's last event)
-- ARGV[4] now ms   ARGV[5] TTL ms (0: keep)   ARGV[6] key base <prefix>:{<threadId>}:
--
-- Errors: NORUN when the run hash is missing (the caller may re-create it with append.lua).
-- On success the TTL of every key of the thread is refreshed, so a thread and all its runs
-- live at least TTL after its last finished run. Returns the number of gap ranges added.
-- Ends with a sharded publish of "end" on the channel named like KEYS[4] (the live tail on
-- Redis Cluster listens there; pcall: a server without SPUBLISH, Redis 6, just has no tail
-- notification).
-- One HMGET reads the run hash (every run hash has an epoch: none means no hash).
local meta = redis.call('HMGET', KEYS[3], 'epoch', 'last', 'gaps')
if not meta[1] then
  return redis.error_reply('NORUN run not found')
end
local last = tonumber(meta[2] or '0')
-- append.lua's fast path leaves "last" behind: the stream's last entry says how far it got.
local top = redis.call('XREVRANGE', KEYS[4], '+', '-', 'COUNT', 1)[1]
if top then
  last = math.max(last, tonumber(string.sub(top[1], 1, string.find(top[1], '-', 1, true) - 1)))
end
local gaps = meta[3] or ''
local added = 0
local function addgap(from, to)
  local r = string.format('%d-%d', from, to)
  if gaps == '' then gaps = r else gaps = gaps .. ',' .. r end
  added = added + 1
end
if last > 0 and redis.call('EXISTS', KEYS[4]) == 0 then
  addgap(1, last)
end
local want = tonumber(ARGV[3])
if want > last then
  addgap(last + 1, want)
end
redis.call('HSET', KEYS[3], 'status', ARGV[1], 'detail', ARGV[2], 'updated', ARGV[4], 'gaps', gaps, 'last', last)
local ttl = tonumber(ARGV[5])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
  for _, id in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
    redis.call('PEXPIRE', ARGV[6] .. 'run:' .. id, ttl)
    redis.call('PEXPIRE', ARGV[6] .. 'events:' .. id, ttl)
    redis.call('PEXPIRE', ARGV[6] .. 'checkpoint:' .. id, ttl)
    redis.call('PEXPIRE', ARGV[6] .. 'packed:' .. id, ttl)
  end
end
redis.pcall('SPUBLISH', KEYS[4], 'end')
return added
