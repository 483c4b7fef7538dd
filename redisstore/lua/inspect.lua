-- inspect: one key's state, read-only.
-- KEYS[1] counter (in the namespace), KEYS[2] ban record, KEYS[3]
-- offense history (in the ban namespace).
-- ARGV[1] offense window ms.
-- Returns {count, counter ms left, offenses, ban record or '', the ban
-- record's ms left (-1: never expires)}.
local count = read_count(KEYS[1]) -- no count there reads as none
local cttl = redis.call('PTTL', KEYS[1])
local offenses = redis.call('ZCOUNT', KEYS[3], '(' .. (now_ms() - tonumber(ARGV[1])), '+inf')
local rec = read_ban(KEYS[2]) or ''
return {count, cttl, offenses, rec, redis.call('PTTL', KEYS[2])}
