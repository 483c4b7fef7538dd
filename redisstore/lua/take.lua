-- take: ban check, count and threshold ban for one key, atomically.
-- KEYS[1] the key's base, <ns>{<key>}: its counter is KEYS[1]..':c'.
-- KEYS[2] the key's ban base, <bns>{<key>} (absent: KEYS[1], when the
--   ban namespace is the namespace): its ban record is ..':b', its offense
--   history ..':o'. Bases share the key's hash tag, so every key sits in
--   the slot of KEYS[1] and the script is legal on Redis Cluster; declared
--   bases instead of three keys keep every request's command short.
-- KEYS[3] on Redis Cluster, the index of key bans of this slot,
--   <bns>{<slot tag>}:bans (absent: <bns>bans, one per ban namespace).
--   A ban written here is added to it, scored by its expiry, so that
--   listing bans reads the index, never a SCAN of the keyspace.
-- ARGV[1] n to count (0: decide only, write nothing).
-- ARGV[2] the limits, "ttl|ban limit|first ban|factor|max ban|offense
--   window|ban reason", times in ms, ban limit negative for never.
-- Returns the count, an integer, when not banned; else
-- {count, ms left (0: permanent), new (0 or 1), ban record}.
-- A ban record is "created|expires|offense|source|by|reason", times in ms
-- (expires 0: permanent); decodeBan in rediscodec.go reads it.
-- Every time is Redis' own clock: instances' clocks never matter.
local bans = KEYS[2] or KEYS[1]
local counter, banKey, offenses = KEYS[1] .. ':c', bans .. ':b', bans .. ':o'
local rec = redis.call('GET', banKey)
if rec then
  local left = redis.call('PTTL', banKey)
  if left < 0 then left = 0 end
  return {0, left, 0, rec}
end
if ARGV[1] == '0' then
  return tonumber(redis.call('GET', counter) or '0')
end
local ttl, limit, first, factor, cap, window, reason = string.match(ARGV[2], '^(%d+)|(%-?%d+)|(%d+)|([^|]+)|(%d+)|(%d+)|(.*)$')
limit = tonumber(limit)
first, factor, cap, window = tonumber(first), tonumber(factor), tonumber(cap), tonumber(window)
local count = redis.call('INCRBY', counter, ARGV[1]) -- as text: no float on the way
redis.call('PEXPIRE', counter, ttl)
if limit < 0 or count <= limit then
  return count
end
-- Past the ban limit: forget the stream, so that a lifted client starts
-- from nothing, and write an escalating ban. The length is BanLength in
-- banlist.go; storetest's Escalation test keeps the two equal.
redis.call('DEL', counter)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', offenses, '-inf', now - window)
local offense = redis.call('ZCARD', offenses) + 1
redis.call('ZADD', offenses, now, now .. ':' .. offense)
redis.call('PEXPIRE', offenses, window)
local len = first * math.pow(factor, offense - 1)
if len > cap then len = cap end
len = math.floor(len)
if len < 1 then len = 1 end
rec = now .. '|' .. (now + len) .. '|' .. offense .. '|auto||' .. reason
redis.call('SET', banKey, rec, 'PX', len)
local index = KEYS[3] or (string.match(bans, '^([^{]*){') .. 'bans')
redis.call('ZADD', index, now + len, string.match(bans, '{([^}]*)}$'))
-- Entries of bans that ended over a minute ago leave here as well as when
-- someone lists bans: an index nobody reads stays the size of the bans in
-- force, not of every ban ever written. Each entry leaves once.
redis.call('ZREMRANGEBYSCORE', index, '-inf', now - 60000)
return {count, len, 1, rec}
