-- stop.lua: ask the node pumping a running run to cancel it (read back by lease.lua).
--
-- KEYS[1] run hash   <prefix>:{<threadId>}:run:<runId>
--
-- Errors: NORUN when the run hash is missing. Returns 1 when the flag was set, 0 when the run
-- had already ended (nothing to stop).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return redis.error_reply('NORUN run not found')
end
if redis.call('HGET', KEYS[1], 'status') ~= 'running' then
  return 0
end
redis.call('HSET', KEYS[1], 'stop', '1')
return 1
