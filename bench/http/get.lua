-- get.lua - wrk: GET of a uniformly random key key_N (N below $KEYS),
-- appended to the URL's path (run.sh).
local n = tonumber(os.getenv("KEYS"))
local base = wrk.path

request = function()
	return wrk.format("GET", base .. "key_" .. math.random(0, n - 1))
end
