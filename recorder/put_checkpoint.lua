-- put_checkpoint.lua: store a run's checkpoint, only while the run exists.
--
-- KEYS[1] run hash           <prefix>:{<threadId>}:run:<runId>
-- KEYS[2] checkpoint string  <prefix>:{<threadId>}:checkpoint:<runId>
-- ARGV[1] checkpoint bytes   ARGV[2] TTL ms (0: keep)
--
-- Errors: NORUN when the run hash is missing. The checkpoint gets the run's remaining TTL
-- (or ARGV[2] when the run has none left to copy), so it never outlives the run.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return redis.error_reply('NORUN run not found')
end
local ttl = tonumber(ARGV[2])
if ttl > 0 then
  local left = redis.call('PTTL', KEYS[1])
  if left > 0 then ttl = left end
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ttl)
else
  redis.call('SET', KEYS[2], ARGV[1])
end
return 1
