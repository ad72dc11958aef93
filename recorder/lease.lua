-- lease.lua: renew the lease of a running run and report a stop request.
--
-- KEYS[1] run hash   <prefix>:{<threadId>}:run:<runId>
-- ARGV[1] node       ARGV[2] lease expiry, ms since the epoch
--
-- Errors: NORUN when the run hash is missing (a renewal never creates a run). A run that is
-- no longer running keeps the lease it had. Returns 1 when RequestStop (stop.lua) was called
-- for the running run, else 0. Two commands: one HMGET (every run hash has a status, so a
-- missing one is a missing hash), and the HSET while the run is running.
local h = redis.call('HMGET', KEYS[1], 'status', 'stop')
if not h[1] then
  return redis.error_reply('NORUN run not found')
end
if h[1] ~= 'running' then
  return 0
end
redis.call('HSET', KEYS[1], 'node', ARGV[1], 'lease', ARGV[2])
if h[2] == '1' then
  return 1
end
return 0
