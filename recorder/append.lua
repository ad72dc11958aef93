-- append.lua: store one batch of one run's events, atomically with the run's metadata.
--
-- KEYS[1] thread hash    <prefix>:{<threadId>}:thread
-- KEYS[2] runs list      <prefix>:{<threadId>}:runs
-- KEYS[3] run hash       <prefix>:{<threadId>}:run:<runId>
-- KEYS[4] events stream  <prefix>:{<threadId>}:events:<runId>
-- ARGV[1] runId          ARGV[2] epoch        ARGV[3] parentRunId   ARGV[4] owner
-- ARGV[5] route          ARGV[6] status (used only when the run is re-created)
-- ARGV[7] createdAt ms (used only when re-created)   ARGV[8] now ms
-- ARGV[9] TTL ms (0: keep)   ARGV[10] MAXLEN (0: no trim)
-- ARGV[11..] one triple per event, in seq order: seq, type, frame bytes.
--
-- Returns {stored, recreated}: how many events were added (events whose seq is not above the
-- run's "last" are skipped, so a retried batch never duplicates), and 1 when the run's metadata
-- was missing and had to be re-created (a data loss), else 0. stored is -1 when the run hash
-- holds another epoch: the id now names another run, and these events are not its.
-- When events were added it ends with a sharded publish of the last seq on the channel named
-- like KEYS[4] (the live tail on Redis Cluster listens there; pcall: a server without
-- SPUBLISH, Redis 6, just has no tail notification).
local epoch = redis.call('HGET', KEYS[3], 'epoch')
local last = 0
local gaps = ''
local recreated = 0
local function addgap(from, to)
  local r = string.format('%d-%d', from, to)
  if gaps == '' then gaps = r else gaps = gaps .. ',' .. r end
end
if not epoch then
  -- Never created, or lost with the store's data: re-create thread and run from the batch.
  recreated = 1
  redis.call('HSETNX', KEYS[1], 'owner', ARGV[4])
  redis.call('HSETNX', KEYS[1], 'route', ARGV[5])
  redis.call('HSETNX', KEYS[1], 'created', ARGV[7])
  if not redis.call('LPOS', KEYS[2], ARGV[1]) then
    redis.call('RPUSH', KEYS[2], ARGV[1])
  end
  -- A stream left without its metadata cannot be trusted to be whole; start it afresh.
  redis.call('DEL', KEYS[4])
  if #ARGV >= 11 and tonumber(ARGV[11]) > 1 then
    addgap(1, tonumber(ARGV[11]) - 1)
  end
  redis.call('HSET', KEYS[3], 'epoch', ARGV[2], 'parent', ARGV[3], 'status', ARGV[6],
    'detail', '', 'route', ARGV[5], 'owner', ARGV[4], 'created', ARGV[7], 'updated', ARGV[8],
    'last', 0, 'gaps', gaps)
elseif epoch ~= ARGV[2] then
  return {-1, 0}
else
  last = tonumber(redis.call('HGET', KEYS[3], 'last') or '0')
  gaps = redis.call('HGET', KEYS[3], 'gaps') or ''
  if last > 0 and redis.call('EXISTS', KEYS[4]) == 0 then
    -- The stream vanished (evicted or expired) while the metadata stayed.
    addgap(1, last)
  end
end
local maxlen = tonumber(ARGV[10])
local stored = 0
for i = 11, #ARGV, 3 do
  local seq = tonumber(ARGV[i])
  if seq > last then
    if seq > last + 1 then
      addgap(last + 1, seq - 1)
    end
    if maxlen > 0 then
      redis.call('XADD', KEYS[4], 'MAXLEN', '~', maxlen, ARGV[i] .. '-0', 't', ARGV[i + 1], 'f', ARGV[i + 2])
    else
      redis.call('XADD', KEYS[4], ARGV[i] .. '-0', 't', ARGV[i + 1], 'f', ARGV[i + 2])
    end
    last = seq
    stored = stored + 1
  end
end
redis.call('HSET', KEYS[3], 'last', string.format('%d', last), 'updated', ARGV[8], 'gaps', gaps)
local ttl = tonumber(ARGV[9])
if ttl > 0 then
  for i = 1, 4 do
    redis.call('PEXPIRE', KEYS[i], ttl)
  end
end
if stored > 0 then
  redis.pcall('SPUBLISH', KEYS[4], string.format('%d', last))
end
return {stored, recreated}
