-- append_checkpoint.lua: append to a run's checkpoint (a segment taking one more delta),
-- only while the run exists and its checkpoint starts with the given prefix.
--
-- KEYS[1] run hash           <prefix>:{<threadId>}:run:<runId>
-- KEYS[2] checkpoint string  <prefix>:{<threadId>}:checkpoint:<runId>
-- ARGV[1] bytes to append    ARGV[2] TTL ms (0: keep)    ARGV[3] prefix the checkpoint starts with
--
-- Errors: NORUN when the run hash is missing, NOCHECKPOINT when the checkpoint is missing or
-- does not start with ARGV[3] (nothing is appended). Like put_checkpoint.lua, the checkpoint
-- gets the run's remaining TTL (or ARGV[2] when the run has none left to copy).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return redis.error_reply('NORUN run not found')
end
if redis.call('EXISTS', KEYS[2]) == 0 or (#ARGV[3] > 0 and redis.call('GETRANGE', KEYS[2], 0, #ARGV[3] - 1) ~= ARGV[3]) then
  return redis.error_reply('NOCHECKPOINT checkpoint not found')
end
local size = redis.call('APPEND', KEYS[2], ARGV[1])
local ttl = tonumber(ARGV[2])
if ttl > 0 then
  local left = redis.call('PTTL', KEYS[1])
  if left > 0 then ttl = left end
  redis.call('PEXPIRE', KEYS[2], ttl)
end
return size
