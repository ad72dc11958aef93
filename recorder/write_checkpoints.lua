-- write_checkpoints.lua: store runs' checkpoints in order, each only while its run exists:
-- written whole, or appended to (a segment taking one more run's delta) when the checkpoint
-- is there and starts with a given prefix. It stops at the first write that cannot be made;
-- the writes before it stay.
--
-- KEYS[2i-1] run hash           <prefix>:{<threadId>}:run:<runId>
-- KEYS[2i]   checkpoint string  <prefix>:{<threadId>}:checkpoint:<runId>
-- ARGV[1] TTL ms (0: keep); then per write i, from ARGV[3i-1]: mode ('put' or 'append'),
-- prefix (append: what the checkpoint must start with; '' for any), bytes.
--
-- Returns {writes made, ''} or {writes made, code} with code NORUN (the run hash is missing)
-- or NOCHECKPOINT (append: no checkpoint, or one not starting with the prefix; nothing
-- appended). A checkpoint gets its run's remaining TTL (ARGV[1] when the run has none left to
-- copy), so it never outlives the run.
local ttl = tonumber(ARGV[1])
for i = 1, #KEYS / 2 do
  local run, ckpt = KEYS[2 * i - 1], KEYS[2 * i]
  local mode, prefix, data = ARGV[3 * i - 1], ARGV[3 * i], ARGV[3 * i + 1]
  if redis.call('EXISTS', run) == 0 then
    return {i - 1, 'NORUN'}
  end
  local px = ttl
  if ttl > 0 then
    local left = redis.call('PTTL', run)
    if left > 0 then px = left end
  end
  if mode == 'append' then
    if redis.call('EXISTS', ckpt) == 0 or (#prefix > 0 and redis.call('GETRANGE', ckpt, 0, #prefix - 1) ~= prefix) then
      return {i - 1, 'NOCHECKPOINT'}
    end
    redis.call('APPEND', ckpt, data)
    if px > 0 then redis.call('PEXPIRE', ckpt, px) end
  elseif px > 0 then
    redis.call('SET', ckpt, data, 'PX', px)
  else
    redis.call('SET', ckpt, data)
  end
end
return {#KEYS / 2, ''}
