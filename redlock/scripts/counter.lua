-- Prepended to the scripts that lift a fence counter (raise, heal, reacquire).
-- below(a, b): a < b for counters and tokens as decimal strings of up to 20
-- digits, compared as exact integers (two 10-digit halves), never as doubles,
-- which lose precision past 2^53.
local function below(a, b)
  a, b = string.rep('0', 20 - #a) .. a, string.rep('0', 20 - #b) .. b
  local ah, bh = tonumber(string.sub(a, 1, 10)), tonumber(string.sub(b, 1, 10))
  return ah < bh or (ah == bh and tonumber(string.sub(a, 11)) < tonumber(string.sub(b, 11)))
end
