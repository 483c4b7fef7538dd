-- unban: lift one key ban and drop it from its index, atomically.
-- KEYS[1] the ban record, <bns>{<key>}:b; KEYS[2] its index (see
-- take.lua). ARGV[1] the key, as the index holds it.
-- Returns {the record lifted, its ms left (-1: the key never expired)},
-- or false when there was none.
local rec = read_ban(KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if not rec then return false end
local left = redis.call('PTTL', KEYS[1])
redis.call('DEL', KEYS[1])
return {rec, left}
