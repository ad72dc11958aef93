-- delete_run.lua: remove a run and, when it was the last one, its thread.
--
-- KEYS[1] thread hash        <prefix>:{<threadId>}:thread
-- KEYS[2] runs list          <prefix>:{<threadId>}:runs
-- KEYS[3] run hash           <prefix>:{<threadId>}:run:<runId>
-- KEYS[4] events stream      <prefix>:{<threadId>}:events:<runId>
-- KEYS[5] checkpoint string  <prefix>:{<threadId>}:checkpoint:<runId>
-- KEYS[6] packed string      <prefix>:{<threadId>}:packed:<runId>
-- ARGV[1] runId
--
-- Errors: NOTHREAD when the thread does not exist, NORUN when the run does not.
-- Returns the number of runs left in the thread.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return redis.error_reply('NOTHREAD thread not found')
end
if redis.call('EXISTS', KEYS[3]) == 0 then
  return redis.error_reply('NORUN run not found')
end
redis.call('DEL', KEYS[3], KEYS[4], KEYS[5], KEYS[6])
redis.call('LREM', KEYS[2], 0, ARGV[1])
local left = redis.call('LLEN', KEYS[2])
if left == 0 then
  redis.call('DEL', KEYS[1], KEYS[2])
end
return left
