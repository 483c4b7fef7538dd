-- lift: remove one key's ban and return what it was.
-- KEYS[1] ban record. Returns the record's field/value pairs, or {}.
local ban = redis.call('HGETALL', KEYS[1])
if #ban > 0 then redis.call('DEL', KEYS[1]) end
return ban
