-- plan: ban check, the stream (when asked), then every limit of a plan,
-- all or nothing, atomically. plan.go describes the arithmetic; this
-- script and planLimit.rateFits compute the same, in the same integers.
-- KEYS[1] the key's base, <ns>{<key>}: its stream counter is base..':c',
--   a rate's TAT base..':r:<name>', a quota's count
--   base..':q:<name>:<window>'.
-- KEYS[2] the key's ban base, <bns>{<key>} (absent: KEYS[1]): its ban
--   record is ..':b', its offense history ..':o'. Both bases share the
--   key's hash tag, so every key sits in the slot of KEYS[1] and the
--   script is legal on Redis Cluster.
-- KEYS[3] on Redis Cluster, the index of key bans of this slot (absent:
--   <bns>bans), as in take.lua.
-- ARGV[1] the cost (0: decide as for 1, write nothing).
-- ARGV[2] the stream's limits (see limits in prelude.lua); '' for no
--   stream.
-- ARGV[3...] seven per limit: 'r', name, limit, the bucket's depth (µs),
--   the depth's remainder (1/limit µs), and the increment of this cost
--   (µs, remainder; 'n', 'n' when the cost can never fit) for a rate;
--   'q', name, limit, 'h', 'd' or 'm', '0', '0', '0' for a quota.
-- ARGV[last], when the count of ARGV after the second is not a multiple of
--   seven: the SHA-1 of a damaged ban record to decide as if it were
--   absent (see damaged in prelude.lua); the reply then starts with 2.
-- Returns, when banned, {0, count, ms left (0: permanent), new (0 or 1),
-- ban record}; else {1, now µs, stream count, then for each limit: fits
-- (0 or 1), a, b}, where a, b are a rate's TAT (µs) and remainder or a
-- quota's count and window end (µs): the new state when every limit fit
-- and the cost is positive, else the current one. decodePlan in codec.go
-- reads it.
--
-- Each redis.call costs more than the arithmetic around it, so the
-- script reads everything with one MGET and writes each key with one SET
-- (PX included): a plan of one rate is TIME, MGET, SET.
local base = KEYS[1]
local bans = KEYS[2] or KEYS[1]
local cost = tonumber(ARGV[1])
local stream = ARGV[2]
local n = math.floor((#ARGV - 2) / 7)
local ignore = nil
if (#ARGV - 2) % 7 == 1 then ignore = ARGV[#ARGV] end
local now = now_us()

-- The keys to read: the ban, each limit's state, the stream's counter.
local keys = {bans .. ':b'}
local wend = {}
local y, m, d, secs, day
for i = 1, n do
  local o = 7 * i - 4 -- ARGV[o] is the limit's kind
  if ARGV[o] == 'r' then
    keys[i + 1] = base .. ':r:' .. ARGV[o + 1]
  else
    if not y then
      -- The calendar, without the os library: Howard Hinnant's
      -- civil_from_days, in days since 1970-01-01.
      secs = math.floor(now / 1000000)
      day = math.floor(secs / 86400)
      local z = day + 719468
      local era = math.floor(z / 146097)
      local doe = z - era * 146097
      local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
      local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
      local mp = math.floor((5 * doy + 2) / 153)
      d = doy - math.floor((153 * mp + 2) / 5) + 1
      m = mp < 10 and mp + 3 or mp - 9
      y = yoe + era * 400
      if m <= 2 then y = y + 1 end
    end
    local p, wname = ARGV[o + 3]
    if p == 'h' then
      wname = string.format('%04d-%02d-%02dT%02d', y, m, d, math.floor((secs - day * 86400) / 3600))
      wend[i] = (math.floor(secs / 3600) + 1) * 3600000000
    elseif p == 'd' then
      wname = string.format('%04d-%02d-%02d', y, m, d)
      wend[i] = (day + 1) * 86400000000
    else
      wname = string.format('%04d-%02d', y, m)
      -- days_from_civil of the first of next month.
      local ny, nm = y, m + 1
      if nm > 12 then ny, nm = y + 1, 1 end
      if nm <= 2 then ny = ny - 1 end
      local era = math.floor(ny / 400)
      local yoe = ny - era * 400
      local doy = math.floor((153 * (nm > 2 and nm - 3 or nm + 9) + 2) / 5)
      wend[i] = (era * 146097 + yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy - 719468) * 86400000000
    end
    keys[i + 1] = base .. ':q:' .. ARGV[o + 1] .. ':' .. wname
  end
end
if stream ~= '' then keys[n + 2] = base .. ':c' end
local vals = redis.call('MGET', unpack(keys))

local kind = 1
if vals[1] then
  if not damaged(vals[1], ignore) then
    return {0, 0, ban_left(keys[1]), 0, vals[1]}
  end
  kind = 2
end

local count = 0
if stream ~= '' then
  count = tonumber(vals[n + 2]) or 0
  if cost > 0 then
    -- As in take.lua: the whole limits text is read only for a ban.
    local ttl, limit = counting_limits(stream)
    count = count + cost
    if limit >= 0 and count > limit then
      local len, rec = escalate(keys[n + 2], bans, KEYS[3], math.floor(now / 1000), limits(stream))
      return {0, count, len, 1, rec}
    end
    -- What take.lua's INCRBY and PEXPIRE do, in one call.
    redis.call('SET', keys[n + 2], string.format('%d', count), 'PX', ttl)
  end
end

local c = cost
if c < 1 then c = 1 end
local out = {kind, now, count}
local nx = {}
local all = true
for i = 1, n do
  local o = 7 * i - 4
  local lim = tonumber(ARGV[o + 2])
  local v = vals[i + 1]
  local fits, a, b
  if ARGV[o] == 'r' then
    a, b = now, 0
    if v then
      local sa, sb = string.match(v, '^(%d+)|(%d+)$')
      sa, sb = tonumber(sa), tonumber(sb)
      -- A TAT in the past is a full bucket.
      if sa and sb and sa >= now then a, b = sa, sb end
    end
    if b > lim - 1 then b = lim - 1 end -- stored under another limit
    fits = false
    local ntat, nrem = a, b
    if ARGV[o + 5] ~= 'n' then
      ntat, nrem = a + tonumber(ARGV[o + 5]), b + tonumber(ARGV[o + 6])
      if nrem >= lim then ntat, nrem = ntat + 1, nrem - lim end
      -- It fits when the new TAT is at most the bucket's depth ahead.
      local dd = ntat - tonumber(ARGV[o + 3]) - now
      fits = dd < 0 or (dd == 0 and nrem <= tonumber(ARGV[o + 4]))
    end
    nx[2 * i - 1], nx[2 * i] = ntat, nrem
  else
    a, b = tonumber(v) or 0, wend[i]
    fits = c <= lim - a
    nx[2 * i - 1], nx[2 * i] = a + c, b
  end
  all = all and fits
  out[3 * i + 1] = fits and 1 or 0
  out[3 * i + 2] = a
  out[3 * i + 3] = b
end
if all and cost > 0 then
  for i = 1, n do
    local a, b = nx[2 * i - 1], nx[2 * i]
    local ms
    if ARGV[7 * i - 4] == 'r' then
      -- The key expires when the bucket is full again.
      ms = math.ceil((a - now + (b > 0 and 1 or 0)) / 1000)
      if ms < 1 then ms = 1 end
      redis.call('SET', keys[i + 1], string.format('%d|%d', a, b), 'PX', ms)
    else
      -- The count expires with its window.
      ms = math.ceil((b - now) / 1000)
      if ms < 1 then ms = 1 end
      redis.call('SET', keys[i + 1], string.format('%d', a), 'PX', ms)
    end
    out[3 * i + 2] = a
    out[3 * i + 3] = b
  end
end
return out
