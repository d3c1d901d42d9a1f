-- Acquire one node's share of a lock and draw a fencing counter value.
-- KEYS[1] lock key (the user's key), KEYS[2] fence counter of its hash slot
-- ARGV[1] this hold's value, ARGV[2] ttl in milliseconds, ARGV[3] release
-- channel or ''
-- Returns {1, counter} when granted, {0, pttl, counter, holder} when refused,
-- where holder is the value that holds the key: a contender's partial grant
-- tells a split vote from a held lock. Counters travel as decimal strings:
-- a Lua number is a double and would round counters past 2^53.
local c = redis.call('GET', KEYS[2]) or '0'
if not string.match(c, '^%d+$') then
  return redis.error_reply('fencedlock: fence counter ' .. KEYS[2] .. ' is not a counter')
end
if c == '9223372036854775807' then
  -- INCR would fail after the SET: refuse before writing anything.
  return redis.error_reply('fencedlock: fence counter ' .. KEYS[2] .. ' is exhausted')
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  redis.call('INCR', KEYS[2])
  if ARGV[3] and ARGV[3] ~= '' then
    -- Announce the grant ('+', the value, a space and the TTL in
    -- milliseconds) to waiters woken by the last release: once a quorum
    -- announced one value, the key is taken again and they need not ask
    -- until its release, or its TTL.
    redis.call('PUBLISH', ARGV[3], '+' .. ARGV[1] .. ' ' .. ARGV[2])
  end
  return {1, redis.call('GET', KEYS[2])}
end
return {0, redis.call('PTTL', KEYS[1]), c, redis.call('GET', KEYS[1])}
