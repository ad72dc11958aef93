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
--   epoch, mode ('1': the fast path, below; else '0'),
--   [parentRunId, owner, route, status, createdAt ms: only when ARGV[4] is 1],
--   the number m of its stream entries, then m quadruples in seq order: the entry's last
--   seq (its id), its event count c, and for c = 1 the event's type and frame (a version 1 entry,
--   fields t and f), for c > 1 any string and the packed events (a version 2 entry, fields
--   n and p: per event a uvarint length and the type, a uvarint length and the frame; the
--   events' seqs are consecutive, last - c + 1 to last; redis_entry.go), then the run's
--   finish: its final status ('' for none) and, when there is one, detail and lastSeq (the
--   seq of the run's last event). A finish is finish_run.lua's, applied after the run's
--   events in the same call, so a run's last events and its end cost one round trip and are
--   never seen apart.
--
-- An entry's id is the seq of its last event: readers find the entry holding seq s as the
-- first one from s-0.
--
-- Returns, for each run, in KEYS order, four integers: stored, recreated, finished and lease.
-- stored is how many events were added (events whose seq is not above the run's last stored
-- one are skipped, also inside an entry, so a retried batch never duplicates); -1 when the
-- run hash holds another epoch (the id now names another run, and these events are not its);
-- -2 when the run hash is missing and ARGV[4] is 0 (nothing was written for that run: the
-- caller sends it again with what re-creating it takes). recreated is 1 when the run's
-- metadata was missing and had to be re-created (a data loss). finished is 1 when the run's
-- finish was applied (0 when it has none, and with stored -1 or -2: then nothing was written
-- for the run). lease is 1 when the run's lease was renewed, 0 when not (no node given, no
-- event stored, the run not running, stored -1 or -2, the fast path), and 2 when it was
-- renewed and RequestStop (stop.lua) was called for the run, as renew_leases.lua answers.
-- A run that stored events ends with a sharded publish of its last seq on the channel named
-- like its events stream (the live tail listens there; pcall: a server without SPUBLISH,
-- Redis 6, just has no tail notification).
--
-- The full path costs, per run and batch, an HMGET and an XREVRANGE (the run's last stored
-- seq: the fast path does not keep "last" in the hash up to date), an XADD per entry, an HSET
-- (with the lease's two fields when one is given) and the SPUBLISH: the first XADD after
-- stored events says NOMKSTREAM, which finds a stream that vanished (evicted or expired while
-- the metadata stayed) without an EXISTS; a server without NOMKSTREAM (Redis before 6.2)
-- checks with EXISTS instead.
--
-- The fast path (mode '1') is an XADD NOMKSTREAM per entry and the SPUBLISH: the caller
-- (RedisStore.appendCalls) asks for it for a run whose last batch it saw stored, whose
-- entries follow on without a gap, that has no finish, and whose metadata it wrote less than
-- redisMetaEvery ago; the metadata ("last", "updated", the lease, the TTLs) is then brought up
-- to date by the run's next full path, at most redisMetaEvery later. An entry that cannot be
-- added so (the stream vanished; its id is stored already, a retry) sends it and the rest of
-- the run's entries down the full path. At token rates a run has a few events in each batch,
-- packed in one entry: about two commands per entry instead of five.
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

-- answer adds one run's four answers to the reply.
local function answer(stored, recreated, finished, leased)
  out[#out + 1] = stored
  out[#out + 1] = recreated
  out[#out + 1] = finished
  out[#out + 1] = leased
end

-- uvarint reads the unsigned varint at byte i of s; it returns the value and the next index.
local function uvarint(s, i)
  local v, mul = 0, 1
  while true do
    local b = string.byte(s, i)
    i = i + 1
    if b < 128 then
      return v + b * mul, i
    end
    v = v + (b - 128) * mul
    mul = mul * 128
  end
end

-- dropEvents returns packed events without their first k.
local function dropEvents(p, k)
  local i, l = 1, 0
  for _ = 1, k do
    l, i = uvarint(p, i)
    i = i + l
    l, i = uvarint(p, i)
    i = i + l
  end
  return string.sub(p, i)
end

-- xadd adds one entry: id is its last seq; packed, c (a string) events in data (version 2), else one
-- event of type typ whose frame is data (version 1). With a MAXLEN, the stream keeps its
-- last MAXLEN events or more: entries whose last seq is below id - MAXLEN + 1 are trimmed
-- (MINID, approximate: whole stream nodes), so retention counts events, not entries; a
-- server without MINID (Redis before 6.2) trims to MAXLEN entries instead. nomk says
-- NOMKSTREAM, and then a refusal is returned, not raised.
local nominid = false
local function xadd(stream, nomk, id, packed, c, typ, data)
  local f1, v1, f2 = 't', typ, 'f'
  if packed then
    f1, v1, f2 = 'n', c, 'p'
  end
  local eid = id .. '-0'
  local floor = 0
  if maxlen > 0 then
    floor = tonumber(id) - maxlen + 1
  end
  if floor <= 1 then -- nothing to trim: the common case, without a table
    if nomk then
      return redis.pcall('XADD', stream, 'NOMKSTREAM', eid, f1, v1, f2, data)
    end
    return redis.call('XADD', stream, eid, f1, v1, f2, data)
  end
  local args = {stream}
  if nomk then
    args[#args + 1] = 'NOMKSTREAM'
  end
  if nominid then
    args[#args + 1], args[#args + 2], args[#args + 3] = 'MAXLEN', '~', maxlen
  else
    args[#args + 1], args[#args + 2], args[#args + 3] = 'MINID', '~', string.format('%d-0', floor)
  end
  local n = #args
  args[n + 1], args[n + 2], args[n + 3], args[n + 4], args[n + 5] = eid, f1, v1, f2, data
  local res = redis.pcall('XADD', unpack(args))
  if type(res) == 'table' and res.err and not nominid and string.find(res.err, 'syntax', 1, true) then
    nominid = true
    return xadd(stream, nomk, id, packed, c, typ, data)
  end
  if not nomk and type(res) == 'table' and res.err then
    error(res.err)
  end
  return res
end

for k = 1, #KEYS do
  local runkey = KEYS[k]
  -- The one '}' of a run key closes its thread's hash tag (ids and the prefix hold no braces):
  -- a plain find, cheaper than a pattern.
  local tagEnd = string.find(runkey, '}:run:', 1, true)
  local base, runid = string.sub(runkey, 1, tagEnd + 1), string.sub(runkey, tagEnd + 6)
  local stream = base .. 'events:' .. runid
  local epoch, fast = ARGV[a], ARGV[a + 1] == '1'
  local parent, owner, route, status, created
  if full then
    parent, owner, route, status, created = ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], ARGV[a + 6]
    a = a + 7
  else
    a = a + 2
  end
  local m = tonumber(ARGV[a])
  local first, stop = a + 1, a + 4 * m
  a = stop + 1
  local fin, detail, want = ARGV[a], nil, nil
  if fin ~= '' then
    detail, want = ARGV[a + 1], tonumber(ARGV[a + 2])
    a = a + 3
  else
    fin = nil
    a = a + 1
  end

  -- The fast path: the caller vouches that the run's metadata holds and that its entries
  -- follow the last one stored; each is added with NOMKSTREAM alone. The first that cannot
  -- be (the stream vanished, or its id is stored already: a retry) and every later one take
  -- the full path below.
  local fastStored, fastLast = 0, nil
  if fast then
    while first <= stop do
      local c = ARGV[first + 1]
      local id = xadd(stream, true, ARGV[first], c ~= '1', c, ARGV[first + 2], ARGV[first + 3])
      if not id or (type(id) == 'table' and id.err) then
        break
      end
      fastStored, fastLast, first = fastStored + tonumber(c), ARGV[first], first + 4
    end
  end
  if fast and first > stop then
    if fastStored > 0 then
      redis.pcall('SPUBLISH', stream, fastLast)
    end
    answer(fastStored, 0, 0, 0)
  else
    local meta = redis.call('HMGET', runkey, 'epoch', 'last', 'gaps', 'status', 'stop')
    local last, gaps, oldgaps = 0, '', nil
    local recreated = 0
    local skip = false
    local leased = 0 -- the lease answer: 1 renewed, 2 renewed and asked to stop
    if not meta[1] then
      if not full then
        answer(-2, 0, 0, 0)
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
        local from = m > 0 and tonumber(ARGV[first]) - tonumber(ARGV[first + 1]) + 1 or 0
        if from > 1 then
          gaps = addgap(gaps, 1, from - 1)
        end
        redis.call('HSET', runkey, 'epoch', epoch, 'parent', parent, 'status', status,
          'detail', '', 'route', route, 'owner', owner, 'created', created, 'updated', now,
          'last', 0, 'gaps', gaps)
        oldgaps = gaps
      end
    elseif meta[1] ~= epoch then
      answer(-1, 0, 0, 0)
      skip = true
    else
      last = tonumber(meta[2] or '0')
      -- The fast path leaves "last" behind: the stream's last entry says how far it got.
      local top = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)[1]
      if top then
        last = math.max(last, tonumber(string.sub(top[1], 1, string.find(top[1], '-', 1, true) - 1)))
      end
      gaps = meta[3] or ''
      oldgaps = gaps
    end
    if not skip then
      -- check: the stream is expected to exist (events stored before) and was not seen yet.
      local check = last > 0 and fastStored == 0
      local stored = fastStored
      local lastArg -- the seq string of the last event stored (ARGV), for HSET and SPUBLISH
      for i = first, stop, 4 do
        local to, c = tonumber(ARGV[i]), tonumber(ARGV[i + 1])
        local from = to - c + 1
        if to > last then
          local toArg, cArg, typ, data, packed = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], c > 1
          if from <= last then
            -- Partly stored (a retry that met a write it did not see answered): the rest only.
            data = dropEvents(data, last - from + 1)
            c, from = to - last, last + 1
            cArg = string.format('%d', c)
          end
          if from > last + 1 then
            gaps = addgap(gaps, last + 1, from - 1)
          end
          local id
          if check then
            check = false
            id = xadd(stream, true, toArg, packed, cArg, typ, data)
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
            xadd(stream, false, toArg, packed, cArg, typ, data)
          end
          last, lastArg = to, toArg
          stored = stored + c
        end
      end
      lastArg = lastArg or fastLast or string.format('%d', last)
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
      answer(stored, recreated, fin and 1 or 0, leased)
    end
  end
end
return out
