-- prelude: what more than one script needs, written once. scripts.go
-- prepends it to every script's text, so each script stays one EVALSHA
-- and these are locals of that script's chunk.
--
-- Every time is Redis' own clock: instances' clocks never matter.
-- A ban record is "created|expires|offense|source|by|reason", times in ms
-- (expires 0: permanent); the reason comes last, so it may hold '|'.
-- decodeBan in codec.go reads it.

-- now_us: a plan's rates need a finer clock than a ban's milliseconds.
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- now_ms: ban records and offenses count in ms.
local function now_ms()
  return math.floor(now_us() / 1000)
end

-- counting_limits reads the first two fields of a space's limits (below):
-- the ttl, as text for PEXPIRE, and the ban limit, which are all that a
-- count within the limit needs; and where the other fields start.
-- A text that does not parse raises an error before the script writes
-- anything.
local function counting_limits(s)
  local ttl, limit, rest = string.match(s, '^(%d+)|(%-?%d+)|()')
  if not rest then error('protect: limits ' .. s .. ': not ttl|ban limit|...') end
  return ttl, tonumber(limit), rest
end

-- journal_opts parses the journal's bounds, "length|age ms" (journal.go):
-- a stream is trimmed to about length entries and about age ms.
local function journal_opts(s)
  local len, age = string.match(s or '', '^(%d+)|(%d+)$')
  if not len then error('protect: journal ' .. tostring(s) .. ': not length|age') end
  return {len = len, age = tonumber(age)}
end

-- limits parses a space's limits, "ttl|ban limit|first ban|factor|max
-- ban|offense window|journal length|journal age|ban reason", times in ms,
-- ban limit negative for never; Space in store.go writes them.
local function limits(s)
  local ttl, limit, rest = counting_limits(s)
  local first, factor, cap, window, jlen, jage, reason = string.match(s, '^(%d+)|([^|]+)|(%d+)|(%d+)|(%d+)|(%d+)|(.*)$', rest)
  -- An error, before escalate deletes the counter: a ban that cannot be
  -- written must not hand the client a fresh count.
  if not reason or not tonumber(factor) then error('protect: limits ' .. s .. ': not ttl|ban limit|first ban|factor|max ban|offense window|journal length|journal age|reason') end
  return {ttl = tonumber(ttl), limit = limit, first = tonumber(first), factor = tonumber(factor),
    cap = tonumber(cap), window = tonumber(window), reason = reason,
    journal = journal_opts(jlen .. '|' .. jage)}
end

local function ban_record(created, expires, offense, source, by, reason)
  return string.format('%d|%d|%d|', created, expires, offense) .. source .. '|' .. by .. '|' .. reason
end

-- ban_expires is nil for a record that does not parse, which a caller
-- keeps rather than drops: nothing removes a ban silently.
local function ban_expires(rec)
  return tonumber(string.match(rec, '^%d+|(%d+)|'))
end

-- ban_left: the ms left of a ban's key, -1 when the key never expires
-- (which a permanent record says, and a temporary one must not: codec.go
-- reports that as damage).
local function ban_left(key)
  local left = redis.call('PTTL', key)
  if left < -1 then left = 0 end
  return left
end

-- read_ban returns the ban record at key, false when there is none. A key
-- of another type (a hash or a list that something else wrote) reads as a
-- text that no ban record is, so that Go contains it as damage to that one
-- key, as it contains a string that is no ban record (codec.go), instead
-- of a WRONGTYPE error that the failure policy would answer for that
-- client on every request.
local function read_ban(key)
  local rec = redis.pcall('GET', key)
  if type(rec) == 'table' and rec.err then
    return 'not a ban record: a key of another type' -- as index.go reads it
  end
  return rec
end

-- read_count returns the count at a counter, 0 when there is none, and
-- when what is there is no count (a key of another type, or text that is
-- no integer) also what is there: the caller reports it as damage to
-- this one key (read_ban's reason), never as an error of the store.
local function read_count(counter)
  local v = redis.pcall('GET', counter)
  if type(v) == 'table' and v.err then
    return 0, 'a key of type ' .. redis.call('TYPE', counter).ok
  end
  if not v then return 0 end
  local n = tonumber(v)
  if not n or string.find(v, '^-?%d+$') == nil or n >= 2^63 or n < -2^63 then return 0, v end
  return n
end

-- add_count adds n to a counter, as INCRBY does. A counter that holds
-- no count (see read_count) is deleted and counted again from nothing,
-- as if it had expired, and what it held is returned second.
local function add_count(counter, n)
  local c = redis.pcall('INCRBY', counter, n)
  if type(c) ~= 'table' or not c.err then return c end
  local _, was = read_count(counter)
  redis.call('DEL', counter)
  return redis.call('INCRBY', counter, n), was or 'a count out of range'
end

-- damaged reports whether rec is the damaged ban record the caller asked
-- to ignore, by its SHA-1: Go, not Lua, decides what is readable, and the
-- request is then decided as if the record were absent (codec.go).
local function damaged(rec, sha)
  return sha ~= nil and sha ~= '' and redis.sha1hex(rec) == sha
end

-- The journal (journal.go): beside each index of key bans, <x>bans, a
-- stream <x>events of what happened to the bans, and a hash <x>banrecs
-- of each indexed ban's record, so that a ban Redis dropped by its TTL
-- can still be journaled as over. Both share the index's hash tag, so a
-- script that may write the index may write them.
local function journal_keys(index)
  local base = string.gsub(index, 'bans$', '')
  return base .. 'events', base .. 'banrecs'
end

-- own_type deletes key when it holds another type than want: damage that
-- is forgotten, as escalate forgets an offense history of another type,
-- rather than a ban that cannot be written.
local function own_type(key, want)
  local kind = redis.call('TYPE', key).ok
  if kind ~= want and kind ~= 'none' then redis.call('DEL', key) end
end

-- last_id is the ID of the newest event stream ever held, '' for none:
-- an event records the one before it, so that a reader can tell an event
-- trimmed away from one never written.
-- XINFO rather than XREVRANGE: the stream's last ID even when its top
-- entry was deleted, and in constant time on every Redis (and miniredis).
local function last_id(stream)
  if redis.call('EXISTS', stream) == 0 then return '' end
  local info = redis.call('XINFO', 'STREAM', stream)
  for i = 1, #info, 2 do
    if info[i] == 'last-generated-id' then return info[i + 1] end
  end
  return ''
end

-- journal appends one event at now ms to stream, and trims it to about
-- jl.len events and jl.age ms (whole stream nodes at a time, as '~'
-- lets Redis do cheaply). kind is ban, lift or expire; key the ban's key
-- or range; is_range '1' for a range; rec the ban record. An entry's ID
-- counts microseconds of Redis' clock, not the milliseconds of '*': a
-- Cluster's journal merges the streams of its slots by ID, and two
-- requests a millisecond apart on two masters are then still in order.
local function journal(stream, jl, now, kind, key, is_range, rec)
  own_type(stream, 'stream')
  local us = now_us()
  local prev = last_id(stream)
  local id = string.format('%d-0', us)
  local pus, pseq = string.match(prev, '^(%d+)-(%d+)$')
  if pus and tonumber(pus) >= us then id = pus .. '-' .. string.format('%d', tonumber(pseq) + 1) end
  local fields = {'kind', kind, 'key', key, 'range', is_range, 'rec', rec, 'time', string.format('%d', now), 'prev', prev}
  local added = redis.pcall('XADD', stream, 'MAXLEN', '~', jl.len, id, unpack(fields))
  if type(added) == 'table' and added.err then
    -- The stream's top was deleted by hand after a later ID: Redis picks
    -- one after it, rather than the ban failing for want of an event.
    redis.call('XADD', stream, 'MAXLEN', '~', jl.len, '*', unpack(fields))
  end
  if us > jl.age * 1000 then redis.call('XTRIM', stream, 'MINID', '~', string.format('%d', us - jl.age * 1000)) end
end

-- sweep journals the end of the bans of index whose end has passed by now
-- (strictly: Redis drops a key only after its last millisecond), which
-- Redis dropped without a word, and drops their entries: each is
-- journaled once, never before its end. At most 100 a call, to keep a
-- script short; every ban written, every lift, every listing and the
-- first Take of a key after its ban sweep, so that an index stays the
-- size of the bans in force.
local function sweep(index, now, jl)
  local ended = redis.call('ZRANGEBYSCORE', index, '-inf', '(' .. now, 'LIMIT', 0, 100)
  if #ended == 0 then return end
  local stream, recs = journal_keys(index)
  own_type(recs, 'hash')
  for _, m in ipairs(ended) do
    local rec = redis.call('HGET', recs, m)
    if rec then journal(stream, jl, now, 'expire', m, '0', rec) end
    redis.call('HDEL', recs, m)
    redis.call('ZREM', index, m)
  end
end

-- sweep_count sweeps index and returns the entries left in it; an empty
-- index (most of a Cluster's) costs one call.
local function sweep_count(index, now, jl)
  if redis.call('EXISTS', index) == 0 then return 0 end
  sweep(index, now, jl)
  return redis.call('ZCOUNT', index, '-inf', '+inf')
end

-- put_ban writes a key ban for len ms (0: permanent), its entry in the
-- index of key bans, so that listing bans reads the index, never a SCAN
-- of the keyspace (index.go), and its event in the journal. Entries of
-- bans that ended are swept first, so that an ended ban's expiry comes
-- before a new ban on its key.
local function put_ban(key, index, member, rec, now, len, jl)
  sweep(index, now, jl)
  local score = '+inf'
  if len > 0 then
    redis.call('SET', key, rec, 'PX', len)
    score = now + len
  else
    redis.call('SET', key, rec)
  end
  redis.call('ZADD', index, score, member)
  local stream, recs = journal_keys(index)
  own_type(recs, 'hash')
  redis.call('HSET', recs, member, rec)
  journal(stream, jl, now, 'ban', member, '0', rec)
end

-- index_of is the index of key bans of the ban base bans: index when the
-- caller declared it (a Cluster's slot index), else <bns>bans.
local function index_of(bans, index)
  return index or (string.match(bans, '^([^{]*){') .. 'bans')
end

-- escalate writes the automatic ban of a key past its ban limit: its
-- stream counter is forgotten, so that a lifted client starts from
-- nothing; the offense is recorded in <bans>:o; the ban, at <bans>:b, lasts
-- first × factor^(n−1) ms capped at cap, n the offenses within the window.
-- BanLength in banlist.go computes the same length, and storetest's
-- Escalation and PlanStreamBans tests keep the two equal.
-- bans is the key's ban base, <bns>{<key>}; index its index of key bans,
-- or nil for <bns>bans (on Redis Cluster the caller declares the slot's
-- index, which a script cannot derive). Returns the length and the record.
local function escalate(counter, bans, index, now, lim)
  redis.call('DEL', counter)
  local offenses = bans .. ':o'
  -- An offense history of another type is damage: it is forgotten, and
  -- this offense is the first, rather than a ban the script cannot write.
  local kind = redis.call('TYPE', offenses).ok
  if kind ~= 'zset' and kind ~= 'none' then redis.call('DEL', offenses) end
  redis.call('ZREMRANGEBYSCORE', offenses, '-inf', now - lim.window)
  local offense = redis.call('ZCARD', offenses) + 1
  redis.call('ZADD', offenses, now, string.format('%d:%d', now, offense))
  redis.call('PEXPIRE', offenses, lim.window)
  local len = lim.first * math.pow(lim.factor, offense - 1)
  if len > lim.cap then len = lim.cap end
  len = math.floor(len)
  if len < 1 then len = 1 end
  local rec = ban_record(now, now + len, offense, 'auto', '', lim.reason)
  index = index_of(bans, index)
  put_ban(bans .. ':b', index, string.match(bans, '{([^}]*)}$'), rec, now, len, lim.journal)
  return len, rec
end


-- read_stream reads the journal's stream beside index (journal.go), after
-- trimming it by age, so that a reader sees none older than the age
-- kept: up to
-- count entries from ID from ('-': the oldest). Returns {the newest ID
-- ever written ('' for none), the newest ID trimmed away ('' for none,
-- or not known), {the entries, as XRANGE returns them}}, or nil when
-- there is no stream. us is Redis' clock, read once by the caller.
local function read_stream(index, jl, from, count, us)
  local stream = journal_keys(index)
  -- Most slots of a Cluster hold neither: one call says so.
  if redis.call('EXISTS', stream) == 0 then return nil end
  if redis.call('TYPE', stream).ok ~= 'stream' then return nil end
  if us > jl.age * 1000 then redis.call('XTRIM', stream, 'MINID', '~', string.format('%d', us - jl.age * 1000)) end
  local last = last_id(stream)
  local gone = last -- all of it, when nothing is kept
  local first = redis.call('XRANGE', stream, '-', '+', 'COUNT', 1)
  if first[1] then
    gone = ''
    local f = first[1][2]
    for i = 1, #f, 2 do
      if f[i] == 'prev' then gone = f[i + 1] end
    end
  end
  return {last, gone, redis.call('XRANGE', stream, from, '+', 'COUNT', count)}
end

-- noticed sweeps the index of a key whose ban record is gone when the
-- key's entry there says its ban ended: the first Take of a client after
-- its ban journals it over (a Take reaches here only with a fresh
-- counter, which a ban deletes: one ZSCORE a counter's window, none for
-- the other requests).
-- lim is the limits text; one that holds no journal bounds (see limits)
-- sweeps nothing rather than fail a request within its limit.
local function noticed(bans, index, lim)
  local len, age = string.match(lim, '^%d+|%-?%d+|%d+|[^|]+|%d+|%d+|(%d+)|(%d+)|')
  if not len then return end
  index = index_of(bans, index)
  -- pcall: an index of another type is for a ban's script to repair, not
  -- a request within its limit to fail on.
  local score = tonumber(redis.pcall('ZSCORE', index, string.match(bans, '{([^}]*)}$')))
  local now = now_ms()
  if score and score < now then sweep(index, now, journal_opts(len .. '|' .. age)) end
end
