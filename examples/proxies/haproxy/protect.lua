-- protect.lua: an HAProxy (2.6+) action that asks protectd about each
-- request before HAProxy passes it on, and gives a refused client
-- protectd's own answer: its status (429, 403, 503), Retry-After, the
-- RateLimit fields and the problem+json body, or the challenge's page.
--
-- In haproxy.cfg (global section, then a frontend):
--
--     lua-load /etc/haproxy/protect.lua
--     http-request lua.protect 127.0.0.1:8089 closed
--
-- The first argument is protectd's address in HAProxy's address format
-- (127.0.0.1:8089, or unix@/run/protectd.sock); the second what happens
-- while protectd does not answer: "closed" refuses with 503 and
-- Retry-After: 5, "open" lets the request through unchecked.
--
-- protectd is asked with only these headers: the client's address as
-- HAProxy saw it (X-Forwarded-For: whatever the client wrote there is
-- never sent), the original method and URI, and a consumer and plan if
-- the configuration named them in the variables txn.protect_consumer and
-- txn.protect_plan after its own authentication, and the client's Cookie
-- header, for the challenge's pass. No other client header or
-- credential reaches protectd.
--
-- When protectd lets the request through, the app's request gets
-- X-Protect-Key (what was counted) and the variables txn.protect_ratelimit
-- and txn.protect_policy hold the RateLimit fields, for http-response
-- rules to copy onto the response.

local timeout_ms = 2000

-- The problem body of a refusal while protectd does not answer.
local unavailable = '{"type":"about:blank","title":"Service Unavailable","status":503,"code":"unavailable",' ..
	'"detail":"The request cannot be checked right now. Retry later.","retry_after":5}\n'

-- The headers of protectd's refusal that the client gets; X-Protect-*
-- never does.
local refusal_headers = {"retry-after", "ratelimit", "ratelimit-policy", "cache-control",
	"content-type", "x-content-type-options", "content-security-policy", "referrer-policy"}

-- first returns a response header's value (HAProxy gives each name a
-- list of values), or nil.
local function first(headers, name)
	local v = headers and headers[name]
	if type(v) == "table" then
		return v[0] or v[1]
	end
	return v
end

local function protect(txn, dst, mode)
	local headers = {
		["x-forwarded-for"] = {txn.f:src()},
		["x-original-method"] = {txn.f:method()},
		-- pathq, not url: over HTTP/2 url is the absolute URI, which
		-- protectd, taking only a path, would make the page return to /.
		["x-original-uri"] = {txn.f:pathq()},
	}
	-- The challenge's pass cookie, which protectd checks for a client it
	-- challenges.
	local cookie = txn.f:req_fhdr("cookie")
	if cookie ~= nil and cookie ~= "" then
		headers["cookie"] = {cookie}
	end
	local consumer = txn:get_var("txn.protect_consumer")
	if consumer ~= nil then
		headers["x-protect-consumer"] = {consumer}
		headers["x-protect-plan"] = {txn:get_var("txn.protect_plan") or ""}
	end
	-- The client's own value never reaches the app.
	txn.http:req_del_header("x-protect-key")

	local hc = core.httpclient()
	local ok, res = pcall(hc.get, hc, {url = "http://protectd/verify", dst = dst,
		headers = headers, timeout = timeout_ms})
	-- Every answer of protectd carries X-Protect-Status: without it the
	-- answer came from HAProxy's own client (protectd unreachable, or too
	-- slow), not from protectd.
	local status = ok and res and first(res.headers, "x-protect-status")
	if not status then
		if mode == "open" then
			return
		end
		txn:done{status = 503, headers = {
			["retry-after"] = {"5"},
			["cache-control"] = {"no-store"},
			["content-type"] = {"application/problem+json"},
		}, body = unavailable}
		return
	end

	if res.status >= 200 and res.status < 300 then
		local key = first(res.headers, "x-protect-key")
		if key then
			txn.http:req_set_header("x-protect-key", key)
		end
		local rl, policy = first(res.headers, "ratelimit"), first(res.headers, "ratelimit-policy")
		if rl then txn:set_var("txn.protect_ratelimit", rl) end
		if policy then txn:set_var("txn.protect_policy", policy) end
		return
	end

	local reply = txn:reply{status = res.status, body = res.body}
	for _, name in ipairs(refusal_headers) do
		local v = first(res.headers, name)
		if v then reply:add_header(name, v) end
	end
	txn:done(reply)
end

core.register_action("protect", {"http-req"}, protect, 2)
