-- events: read one stream of the journal (read_stream in prelude.lua).
-- KEYS[1] an index of key bans; its stream is beside it (journal_keys).
-- ARGV[1] the journal's bounds (see journal_opts in prelude.lua);
-- ARGV[2] the first ID to read ('-': the oldest), ARGV[3] how many.
-- Returns read_stream's reply, {'', '', {}} for no stream.
return read_stream(KEYS[1], journal_opts(ARGV[1]), ARGV[2], ARGV[3], now_us()) or {'', '', {}}
