-- Fixed-window rate limit: count the request and make sure the window
-- expires, in one atomic step.
-- KEYS[1]: the window's counter. ARGV[1]: the window in milliseconds.
-- Returns {requests in this window so far, milliseconds until it resets}.
--
-- The two-step version (INCR, then PEXPIRE from the client) is a known bug:
-- a client that dies or times out between the two leaves a counter that never
-- expires, and that key limits its user forever. Checking PTTL here also
-- repairs such a counter left behind by older code.
local n = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {n, ttl}
