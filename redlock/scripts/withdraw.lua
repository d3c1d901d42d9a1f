-- Withdraw a waiter that stopped waiting (its Lock returned without the
-- key): its entry goes at once rather than at the end of its lease, and
-- when the key is free the next head is told (see waiting.lua, prepended),
-- in the name of the withdrawn waiter's wait start and id.
-- Only the entry of this wait start: the Client's next waiter may have
-- entered since with its own.
-- KEYS[1] lock key, KEYS[2] its waiting order, KEYS[3] its leases
-- ARGV[1] the waiter's wait start in ms, ARGV[2] its Client's id, ARGV[3]
-- a fresh value that names this withdrawal in the announcement (two
-- withdrawals are two events: see release.lua)
if not withdraw(KEYS[2], KEYS[3], ARGV[1], ARGV[2]) then
  return 0
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  announce(KEYS[1], KEYS[2], KEYS[3], ARGV[3])
end
return 1
