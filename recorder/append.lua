-- append.lua: store one batch of events of one or more runs of one slot, each run atomically
-- with its metadata.
--
-- KEYS[i] run hash of the i-th run   <prefix>:{<threadId>}:run:<runId>
--   The run's other keys are built from it as keys.go builds them: <base>events:<runId>,
--   <base>thread, <base>runs, where <base> is <prefix>:{<threadId>}: (all in the slot of
--   KEYS[i]; every KEYS[i] of one call shares a slot, as Redis Cluster requires).
-- ARGV[1] now ms   ARGV[2] TTL ms (0: keep)   ARGV[3] MAXLEN (0: no trim)
-- ARGV[4] 1 when each run carries what re-creating it takes, else 0
-- ARGV[5] node ('' for none)   ARGV[6] lease expiry, ms since the epoch: when a node is given,
--   the lease of every running run that stores events is renewed as renew_leases.lua renews
--   it (node, lease), in the HSET the run takes anyway: a run that streams holds its lease
--   through its appends, without a renewal of its own.
-- then for each run, in KEYS order:
--   epoch, [parentRunId, owner, route, status, createdAt ms: only when ARGV[4] is 1],
--   the number n of its events, then n triples in seq order: seq, type, frame bytes,
--   then the run's finish: its final status ('' for none) and, when there is one, detail and
--   lastSeq (the seq of the run's last event). A finish is finish_run.lua's, applied after the
--   run's events in the same call, so a run's last events and its end cost one round trip
--   and are never seen apart.
--
-- Returns, for each run, in KEYS order, four integers: stored, recreated, finished and lease.
-- stored is how many events were added (events whose seq is not above the run's "last" are
-- skipped, so a retried batch never duplicates); -1 when the run hash holds another epoch (the id now names another
-- run, and these events are not its); -2 when the run hash is missing and ARGV[4] is 0 (nothing
-- was written for that run: the caller sends it again with what re-creating it takes).
-- recreated is 1 when the run's metadata was missing and had to be re-created (a data loss).
-- finished is 1 when the run's finish was applied (0 when it has none, and with stored -1 or
-- -2: then nothing was written for the run). lease is 1 when the run's lease was renewed, 0 when
-- not (no node given, no event stored, the run not running, stored -1 or -2), and 2 when it was
-- renewed and RequestStop (stop.lua) was called for the run, as renew_leases.lua answers.
-- A run that stored events ends with a sharded publish of its last seq on the channel named
-- like its events stream (the live tail listens there; pcall: a server without SPUBLISH,
-- Redis 6, just has no tail notification).
--
-- Per run and batch this costs an HMGET, an XADD per event, an HSET (with the lease's two
-- fields when one is given) and the SPUBLISH: the first XADD after stored events says
-- NOMKSTREAM, which finds a stream that vanished (evicted or expired while the metadata stayed)
-- without an EXISTS; a server without NOMKSTREAM (Redis before 6.2) checks with EXISTS instead.
local now, ttl, maxlen, full = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4] == '1'
local node, lease = ARGV[5], ARGV[6]
local out = {}
local refreshed = {}
local a = 7

-- addgap returns gaps with the range from-to added.
local function addgap(gaps, from, to)
  local r = string.format('%d-%d', from, to)
  if gaps == '' then return r end
  return gaps .. ',' .. r
end

local function xadd(stream, nomk, seq, typ, frame)
  local id = seq .. '-0'
  if nomk then
    if maxlen > 0 then
      return redis.pcall('XADD', stream, 'NOMKSTREAM', 'MAXLEN', '~', maxlen, id, 't', typ, 'f', frame)
    end
    return redis.pcall('XADD', stream, 'NOMKSTREAM', id, 't', typ, 'f', frame)
  end
  if maxlen > 0 then
    return redis.call('XADD', stream, 'MAXLEN', '~', maxlen, id, 't', typ, 'f', frame)
  end
  return redis.call('XADD', stream, id, 't', typ, 'f', frame)
end

for k = 1, #KEYS do
  local runkey = KEYS[k]
  -- The one '}' of a run key closes its thread's hash tag (ids and the prefix hold no braces):
  -- a plain find, cheaper than a pattern.
  local tagEnd = string.find(runkey, '}:run:', 1, true)
  local base, runid = string.sub(runkey, 1, tagEnd + 1), string.sub(runkey, tagEnd + 6)
  local stream = base .. 'events:' .. runid
  local epoch = ARGV[a]
  local parent, owner, route, status, created
  if full then
    parent, owner, route, status, created = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5]
    a = a + 6
  else
    a = a + 1
  end
  local n = tonumber(ARGV[a])
  local first, stop = a + 1, a + 3 * n
  a = stop + 1
  local fin, detail, want = ARGV[a], nil, nil
  if fin ~= '' then
    detail, want = ARGV[a + 1], tonumber(ARGV[a + 2])
    a = a + 3
  else
    fin = nil
    a = a + 1
  end

  local meta = redis.call('HMGET', runkey, 'epoch', 'last', 'gaps', 'status', 'stop')
  local last, gaps, oldgaps = 0, '', nil
  local recreated = 0
  local skip = false
  local leased = 0 -- the lease answer: 1 renewed, 2 renewed and asked to stop
  if not meta[1] then
    if not full then
      out[#out + 1] = -2
      out[#out + 1] = 0
      out[#out + 1] = 0
      out[#out + 1] = 0
      skip = true
    else
      -- Never created, or lost with the store's data: re-create thread and run from the batch.
      recreated = 1
      local thread, runs = base .. 'thread', base .. 'runs'
      redis.call('HSETNX', thread, 'owner', owner)
      redis.call('HSETNX', thread, 'route', route)
      redis.call('HSETNX', thread, 'created', created)
      if not redis.call('LPOS', runs, runid) then
        redis.call('RPUSH', runs, runid)
      end
      -- A stream left without its metadata cannot be trusted to be whole; start it afresh.
      redis.call('DEL', stream)
      if n > 0 and tonumber(ARGV[first]) > 1 then
        gaps = addgap(gaps, 1, tonumber(ARGV[first]) - 1)
      end
      redis.call('HSET', runkey, 'epoch', epoch, 'parent', parent, 'status', status,
        'detail', '', 'route', route, 'owner', owner, 'created', created, 'updated', now,
        'last', 0, 'gaps', gaps)
      oldgaps = gaps
    end
  elseif meta[1] ~= epoch then
    out[#out + 1] = -1
    out[#out + 1] = 0
    out[#out + 1] = 0
    out[#out + 1] = 0
    skip = true
  else
    last = tonumber(meta[2] or '0')
    gaps = meta[3] or ''
    oldgaps = gaps
  end
  if not skip then
    -- check: the stream is expected to exist (events stored before) and was not seen yet.
    local check = last > 0
    local stored = 0
    local lastArg -- the seq string of the last event stored (ARGV), for HSET and SPUBLISH
    for i = first, stop, 3 do
      local seq = tonumber(ARGV[i])
      if seq > last then
        if seq > last + 1 then
          gaps = addgap(gaps, last + 1, seq - 1)
        end
        local id
        if check then
          check = false
          id = xadd(stream, true, ARGV[i], ARGV[i + 1], ARGV[i + 2])
          if type(id) == 'table' and id.err then
            id = false -- no NOMKSTREAM (or another refusal, which the plain XADD raises)
            if redis.call('EXISTS', stream) == 0 then
              gaps = addgap(gaps, 1, last)
            end
          elseif not id then
            gaps = addgap(gaps, 1, last) -- the stream vanished
          end
        end
        if not id then
          xadd(stream, false, ARGV[i], ARGV[i + 1], ARGV[i + 2])
        end
        last, lastArg = seq, ARGV[i]
        stored = stored + 1
      end
    end
    lastArg = lastArg or string.format('%d', last)
    if fin then
      -- finish_run.lua's rules: a stream that vanished (no event stored by this call to show
      -- it exists) and a missing tail are gaps.
      if stored == 0 and last > 0 and redis.call('EXISTS', stream) == 0 then
        gaps = addgap(gaps, 1, last)
      end
      if want > last then
        gaps = addgap(gaps, last + 1, want)
      end
      redis.call('HSET', runkey, 'last', lastArg, 'updated', now, 'gaps', gaps, 'status', fin, 'detail', detail)
    elseif stored > 0 and node ~= '' and meta[4] == 'running' then
      -- Renewed as renew_leases.lua renews a running run's lease.
      leased = 1
      if meta[5] == '1' then
        leased = 2
      end
      if gaps ~= oldgaps then
        redis.call('HSET', runkey, 'last', lastArg, 'updated', now, 'gaps', gaps, 'node', node, 'lease', lease)
      else
        redis.call('HSET', runkey, 'last', lastArg, 'updated', now, 'node', node, 'lease', lease)
      end
    elseif gaps ~= oldgaps then
      redis.call('HSET', runkey, 'last', lastArg, 'updated', now, 'gaps', gaps)
    else
      redis.call('HSET', runkey, 'last', lastArg, 'updated', now)
    end
    if ttl > 0 then
      if fin then
        -- A finished run refreshes every key of its thread, as finish_run.lua does.
        redis.call('PEXPIRE', base .. 'thread', ttl)
        redis.call('PEXPIRE', base .. 'runs', ttl)
        for _, id in ipairs(redis.call('LRANGE', base .. 'runs', 0, -1)) do
          redis.call('PEXPIRE', base .. 'run:' .. id, ttl)
          redis.call('PEXPIRE', base .. 'events:' .. id, ttl)
          redis.call('PEXPIRE', base .. 'checkpoint:' .. id, ttl)
          redis.call('PEXPIRE', base .. 'packed:' .. id, ttl)
        end
      else
        redis.call('PEXPIRE', runkey, ttl)
        redis.call('PEXPIRE', stream, ttl)
        if not refreshed[base] then
          refreshed[base] = true
          redis.call('PEXPIRE', base .. 'thread', ttl)
          redis.call('PEXPIRE', base .. 'runs', ttl)
        end
      end
    end
    if stored > 0 then
      redis.pcall('SPUBLISH', stream, lastArg)
    end
    if fin then
      redis.pcall('SPUBLISH', stream, 'end')
    end
    out[#out + 1] = stored
    out[#out + 1] = recreated
    out[#out + 1] = fin and 1 or 0
    out[#out + 1] = leased
  end
end
return out
