-- eventsall: events.lua for every slot of one master of a Cluster at
-- once, rather than one EVALSHA for each of 16384 slots. scripts.go
-- starts it with "#!lua flags=allow-cross-slot-keys", which lets it
-- read the streams of other slots of its node (Redis 7 or later).
-- KEYS[1] the index of the master's first slot, for the client to route
-- the call to it.
-- ARGV[1] the journal's bounds, ARGV[2] how many entries a stream,
-- ARGV[3] the first ID to read for the first ARGV[5] slots, ARGV[4]
-- for the others ('-' both: the oldest), ARGV[6] the ban namespace,
-- ARGV[7...] the tags of the master's slots (index.go), in their order.
-- Returns the time of the read (µs), before which every event this
-- master's streams will ever hold is in them already, then {i,
-- read_stream's reply, ...} for the i-th slot (from 1) whose stream
-- exists.
local jl = journal_opts(ARGV[1])
local split = tonumber(ARGV[5])
local bns = ARGV[6]
local us = now_us()
local out = {us}
for i = 7, #ARGV do
  local from = ARGV[4]
  if i - 6 <= split then from = ARGV[3] end
  local base = bns .. '{' .. ARGV[i] .. '}:'
  -- Most slots hold neither an index nor a stream: one call says so.
  local r = redis.call('EXISTS', base .. 'bans', base .. 'events') > 0 and read_stream(base .. 'bans', jl, from, ARGV[2], us)
  if r then
    out[#out + 1] = i - 6
    out[#out + 1] = r
  end
end
return out
