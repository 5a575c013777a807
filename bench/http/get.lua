-- get.lua - wrk: GET of a uniformly random key key_N (N below $KEYS),
-- appended to the URL's path (run.sh). The requests are made before the
-- run (a table of 2^18 random keys, cycled), so that what wrk spends a
-- request is its own I/O, not Lua building strings: the client must not be
-- what limits the faster server.
local n = tonumber(os.getenv("KEYS"))
local reqs, count, i = {}, 262144, 0

init = function()
	local head = "GET " .. wrk.path
	local tail = " HTTP/1.1\r\nHost: " .. wrk.host .. ":" .. wrk.port .. "\r\n\r\n"
	for j = 1, count do
		reqs[j] = head .. "key_" .. math.random(0, n - 1) .. tail
	end
end

request = function()
	i = i % count + 1
	return reqs[i]
end
