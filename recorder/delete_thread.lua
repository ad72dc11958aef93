-- delete_thread.lua: remove a thread with every run, event stream and checkpoint.
--
-- KEYS[1] thread hash  <prefix>:{<threadId>}:thread
-- KEYS[2] runs list    <prefix>:{<threadId>}:runs
-- ARGV[1] owner   ARGV[2] route   (the caller's; the thread must match both)
-- ARGV[3] key base <prefix>:{<threadId>}: (run keys are formed exactly as recorder.key forms
--         them: base .. kind .. ':' .. runId)
--
-- Errors (first word is the code the Go side maps to a sentinel):
--   NOTHREAD  no such thread, or it belongs to another owner or route (the same answer)
--   BUSY      a run of the thread is still running (nothing is deleted)
-- Returns the number of runs deleted.
local meta = redis.call('HMGET', KEYS[1], 'owner', 'route')
if meta[1] == false or meta[1] ~= ARGV[1] or meta[2] ~= ARGV[2] then
  return redis.error_reply('NOTHREAD thread not found')
end
local ids = redis.call('LRANGE', KEYS[2], 0, -1)
for _, id in ipairs(ids) do
  if redis.call('HGET', ARGV[3] .. 'run:' .. id, 'status') == 'running' then
    return redis.error_reply('BUSY run ' .. id .. ' is running')
  end
end
for _, id in ipairs(ids) do
  redis.call('DEL', ARGV[3] .. 'run:' .. id, ARGV[3] .. 'events:' .. id, ARGV[3] .. 'checkpoint:' .. id,
    ARGV[3] .. 'packed:' .. id)
end
redis.call('DEL', KEYS[1], KEYS[2])
return #ids
