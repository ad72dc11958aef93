-- create_run.lua: register a run on its thread, claiming the thread when it is new.
--
-- KEYS[1] thread hash      <prefix>:{<threadId>}:thread
-- KEYS[2] runs list        <prefix>:{<threadId>}:runs
-- KEYS[3] run hash         <prefix>:{<threadId>}:run:<runId>
-- KEYS[4] parent run hash  <prefix>:{<threadId>}:run:<parentRunId> (KEYS[3] again for a root run)
-- ARGV[1] runId   ARGV[2] parentRunId ('' for a root run)   ARGV[3] epoch   ARGV[4] owner
-- ARGV[5] route   ARGV[6] now ms   ARGV[7] TTL ms (0: keep)
-- ARGV[8] key base <prefix>:{<threadId>}: (the TTL refresh reaches every run of the thread;
--         keys are formed exactly as recorder.key forms them: base .. kind .. ':' .. runId)
-- ARGV[9] node pumping the run ('' for none)   ARGV[10] its lease expiry ms (0 for none)
-- ARGV[11] title ('' for none): stored as the thread's title when it has none yet
-- ARGV[12] exclusive (1: refuse while the latest run is running and alive)
-- ARGV[13] lease grace ms   ARGV[14] continue latest (1: a run without parent continues the
--          thread's latest run)
--
-- Owner and route are written together with the first run (HSETNX semantics: the script is
-- atomic, so of two concurrent first POSTs by different identities only one can win).
-- Errors (first word is the code the Go side maps to a sentinel):
--   NOTHREAD      the thread is owned by another identity (indistinguishable from unknown)
--   ROOMMISMATCH  the thread was created through another route
--   RUNEXISTS     the run id is already recorded in the thread
--   NORUN         parentRunId is not a run of this thread
--   BUSY          exclusive, and the thread's latest run is running with a live lease (no
--                 lease, or one that expired less than the grace ago)
-- Returns {} for a new thread, else {owner, route, createdMs, latestRunId, runCount} as they
-- were before this run, and the epoch of the run's parent ('' for a root run): the run's end
-- recognizes the parent's branch it built in memory by it, without reading the parent.
local prev = redis.call('HMGET', KEYS[1], 'owner', 'route', 'created')
local exists = prev[1] ~= false
if exists then
  if prev[1] ~= ARGV[4] then
    return redis.error_reply('NOTHREAD thread owned by another identity')
  end
  if prev[2] ~= ARGV[5] then
    return redis.error_reply('ROOMMISMATCH thread belongs to another route')
  end
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  return redis.error_reply('RUNEXISTS run already started')
end
local parentEpoch = ''
if ARGV[2] ~= '' then
  if not exists or redis.call('EXISTS', KEYS[4]) == 0 then
    return redis.error_reply('NORUN parent run not in thread')
  end
  parentEpoch = redis.call('HGET', KEYS[4], 'epoch') or ''
end
local result = {}
local parent = ARGV[2]
if exists then
  local latest = redis.call('LINDEX', KEYS[2], -1) or ''
  if latest ~= '' then
    local continues = parent == '' and ARGV[14] == '1'
    if ARGV[12] == '1' then
      local st = redis.call('HMGET', ARGV[8] .. 'run:' .. latest, 'status', 'lease', 'epoch')
      local lease = tonumber(st[2] or '0') or 0
      if st[1] == 'running' and (lease == 0 or tonumber(ARGV[6]) < lease + tonumber(ARGV[13])) then
        return redis.error_reply('BUSY thread has a run in progress')
      end
      if continues then
        parentEpoch = st[3] or ''
      end
    elseif continues then
      parentEpoch = redis.call('HGET', ARGV[8] .. 'run:' .. latest, 'epoch') or ''
    end
    if continues then
      parent = latest
    end
  end
  result = {prev[1], prev[2], prev[3] or '0', latest, redis.call('LLEN', KEYS[2]), parentEpoch}
else
  redis.call('HSET', KEYS[1], 'owner', ARGV[4], 'route', ARGV[5], 'created', ARGV[6])
end
-- The fields every append reads or writes (append.lua: epoch, last, gaps, status, stop; last,
-- updated, node, lease) come first, and stop is there from the start: a small hash is a list
-- searched from its head, and a missing field is searched to its end.
redis.call('HSET', KEYS[3], 'epoch', ARGV[3], 'last', 0, 'updated', ARGV[6], 'status', 'running',
  'stop', '0', 'node', ARGV[9], 'lease', ARGV[10], 'gaps', '', 'parent', parent,
  'detail', '', 'route', ARGV[5], 'owner', ARGV[4], 'created', ARGV[6])
redis.call('RPUSH', KEYS[2], ARGV[1])
if ARGV[11] ~= '' then
  redis.call('HSETNX', KEYS[1], 'title', ARGV[11])
end
local ttl = tonumber(ARGV[7])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
  for _, id in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
    redis.call('PEXPIRE', ARGV[8] .. 'run:' .. id, ttl)
    redis.call('PEXPIRE', ARGV[8] .. 'events:' .. id, ttl)
    redis.call('PEXPIRE', ARGV[8] .. 'checkpoint:' .. id, ttl)
    redis.call('PEXPIRE', ARGV[8] .. 'packed:' .. id, ttl)
  end
end
return result
