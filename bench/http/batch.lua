-- batch.lua - wrk: POST of {"keys": [...]} with $BATCH uniformly random
-- keys key_N (N below $KEYS) to shmkv-http's batch endpoint (run.sh).
local n = tonumber(os.getenv("KEYS"))
local k = tonumber(os.getenv("BATCH"))
local headers = {["Content-Type"] = "application/json"}
local keys = {}

request = function()
	for i = 1, k do
		keys[i] = '"key_' .. math.random(0, n - 1) .. '"'
	end
	return wrk.format("POST", nil, headers, '{"keys": [' .. table.concat(keys, ",") .. ']}')
end
