-- events: read one stream of the journal (read_stream in prelude.lua).
-- KEYS[1] an index of key bans; its stream is beside it (journal_keys).
-- ARGV[1] the journal's bounds (see journal_opts in prelude.lua);
-- ARGV[2] the first ID to read ('-': the oldest), ARGV[3] how many.
-- Returns read_stream's reply, {'', '', {}} for no stream, and after it
-- the time of the read (µs), before which every event the stream will
-- ever hold is in it already.
local us = now_us()
local r = read_stream(KEYS[1], journal_opts(ARGV[1]), ARGV[2], ARGV[3], us) or {'', '', {}}
r[4] = us
return r
