-- renew_leases.lua: renew the leases of many running runs pumped by one node (the proxy's lease
-- loop): lease.lua for each key, in one call.
--
-- KEYS[i]  run hash   <prefix>:{<threadId>}:run:<runId>   (on Cluster: all in one slot)
-- ARGV[1]  node       ARGV[2] lease expiry, ms since the epoch
--
-- Returns one integer per key: 1 when RequestStop (stop.lua) was called for the running run,
-- 0 when renewed or no longer running (a run that ended keeps the lease it had), -1 when the
-- run hash is missing (a renewal never creates a run). Per key: one HMGET, and the HSET while
-- the run is running.
local out = {}
for i, k in ipairs(KEYS) do
  local h = redis.call('HMGET', k, 'status', 'stop')
  if not h[1] then
    out[i] = -1
  elseif h[1] ~= 'running' then
    out[i] = 0
  else
    redis.call('HSET', k, 'node', ARGV[1], 'lease', ARGV[2])
    if h[2] == '1' then
      out[i] = 1
    else
      out[i] = 0
    end
  end
end
return out
