-- Acquire one node's share of a lock and draw a fencing counter value,
-- granting only to the first waiter (see waiting.lua, prepended).
-- KEYS[1] lock key (the user's key), KEYS[2] fence counter of its hash slot,
-- KEYS[3] the key's waiting order, KEYS[4] its leases.
-- ARGV[1] this hold's value, ARGV[2] ttl in ms, ARGV[3] the caller's wait
-- start in ms, ARGV[4] its Client's id, ARGV[5] the sleep it plans before
-- its next try and ARGV[6] a slack for that try to arrive, both in ms: on
-- refusal the caller waits (enters or refreshes its entry) for that sleep,
-- but no longer than the holder's key has left (a waiter never sleeps past
-- it), and the slack; 0 and 0 never enter.
-- A grant leaves the caller's entry as it is: the attempt may still fail
-- (too few grants), and then the caller still waits here. The entry goes
-- with the Unlock of the hold (see release.lua), or at its lease's end.
-- A refusal that, with the key free, changes the first waiter announces it.
-- Returns {1, counter} when granted, {0, pttl, counter, holder, head} when
-- refused: holder is the value that holds the key ('' if free: another
-- waiter is first), head the first waiter ("since id", '' if none). Counters
-- travel as decimal strings: a Lua number is a double and would round
-- counters past 2^53.
local c = redis.call('GET', KEYS[2]) or '0'
if not string.match(c, '^%d+$') then
  return redis.error_reply('fencedlock: fence counter ' .. KEYS[2] .. ' is not a counter')
end
if c == '9223372036854775807' then
  -- INCR would fail after the SET: refuse before writing anything.
  return redis.error_reply('fencedlock: fence counter ' .. KEYS[2] .. ' is exhausted')
end
local t = now()
purge(KEYS[3], KEYS[4], t)
local since, id = ARGV[3], ARGV[4]
local lease = tonumber(ARGV[5]) + tonumber(ARGV[6])
local pttl = redis.call('PTTL', KEYS[1])
if pttl > 0 and pttl < tonumber(ARGV[5]) then
  lease = pttl + tonumber(ARGV[6])
end
-- Only a waiter (lease > 0) has an entry of its own to pass over: a caller
-- that does not wait never passes over its Client's waiters.
local own = ''
if lease > 0 then
  own = id
end
local hs, hid = head(KEYS[3], own, since, KEYS[4])
if (not hs or older(since, id, hs, hid)) and redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  redis.call('INCR', KEYS[2])
  return {1, redis.call('GET', KEYS[2])}
end
if lease > 0 then
  local fs, fid = head(KEYS[3], '', '', KEYS[4])
  enter(KEYS[3], KEYS[4], since, id, t, lease)
  hs, hid = head(KEYS[3], '', '', KEYS[4])
  -- The entry replaced its Client's older one (a waiter that left, whose
  -- withdraw has not arrived) and the key is free: the first waiter
  -- changed where nothing will be released, so it is told, as a withdraw
  -- tells it (under this attempt's value: see waiting.lua's announce).
  if pttl == -2 and (fs ~= hs or fid ~= hid) then
    announce(KEYS[1], KEYS[3], KEYS[4], ARGV[1])
  end
end
local first = ''
if hs then
  first = hs .. ' ' .. hid
end
return {0, pttl, c, redis.call('GET', KEYS[1]) or '', first}
