-- Release a hold: delete the key only while it holds this value, and
-- announce the release to the first waiter (see waiting.lua, prepended).
-- The fence counter is never deleted. Every release is announced — an
-- Unlock, a step back, a late grant's: only the head wakes, so there is no
-- herd to spare.
-- KEYS[1] lock key, KEYS[2] its waiting order, KEYS[3] its leases
-- ARGV[1] value. For an Unlock, ARGV[2] the hold's wait start, ARGV[3] its
-- Client's id, ARGV[4] the wait start of the Client's next waiter for the
-- key ('' for none) and ARGV[5] its lease in ms: the hold's waiter is
-- served, so the Client's entry, if it is still the hold's (or gone), passes
-- to that next waiter, or goes; an entry the next waiter made itself stays.
-- A step back passes '' as ARGV[2] and keeps the entry: its caller may
-- still wait.
-- Returns {1, the announcement} when deleted (the releasing Client hears it
-- first: its own next waiter may be the one announced), else 0.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
if ARGV[2] ~= '' then
  local s = redis.call('ZSCORE', KEYS[2], ARGV[3])
  if ARGV[4] ~= '' and (not s or tonumber(s) == tonumber(ARGV[2])) then
    enter(KEYS[2], KEYS[3], ARGV[4], ARGV[3], now(), tonumber(ARGV[5]))
  else
    withdraw(KEYS[2], KEYS[3], ARGV[2], ARGV[3])
  end
end
return {1, announce(KEYS[1], KEYS[2], KEYS[3], ARGV[1])}
