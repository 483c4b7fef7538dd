-- sweepall: sweep.lua for every slot of one master of a Cluster at once,
-- rather than one EVALSHA for each of 16384 slots. scripts.go starts it
-- with "#!lua flags=allow-cross-slot-keys", which lets it reach the
-- indexes of other slots of its node (Redis 7 or later).
-- KEYS[1] the index of the master's first slot, for the client to route
-- the call to it.
-- ARGV[1] the journal's bounds, ARGV[2] the ban namespace, ARGV[3...] the
-- tags of the master's slots (index.go), in their order.
-- Returns {i, entries left, ...} for the i-th slot (from 1) whose index
-- holds any.
local jl = journal_opts(ARGV[1])
local bns = ARGV[2]
local now = now_ms()
local out = {}
for i = 3, #ARGV do
  local n = sweep_count(bns .. '{' .. ARGV[i] .. '}:bans', now, jl)
  if n > 0 then
    out[#out + 1] = i - 2
    out[#out + 1] = n
  end
end
return out
