-- Release a hold: delete the key only while it holds this value, and
-- announce the release to the first waiter (see waiting.lua, prepended).
-- The fence counter is never deleted. Every release is announced — an
-- Unlock, a step back, a late grant's: only the head wakes, so there is no
-- herd to spare.
-- KEYS[1] lock key, KEYS[2] its waiting order, KEYS[3] its leases
-- ARGV[1] value
-- Returns {1, the announcement} when deleted (the releasing Client hears it
-- first: its own next waiter may be the one announced), else 0.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return {1, announce(KEYS[1], KEYS[2], KEYS[3], ARGV[1])}
end
return 0
