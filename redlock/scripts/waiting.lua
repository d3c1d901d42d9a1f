-- The waiting set of a lock key, shared by the scripts that grant and
-- release it (prepended to them). Per key, in the key's hash slot: an order
-- set (score: the waiter's wait start in ms on its client's clock; member:
-- its Client's id, so equal starts order by id) and a lease set (score: when
-- the entry lapses, in ms on this node's clock). A waiter is first when no
-- other entry is older: the node grants the key to nobody else.

-- now is this node's time in milliseconds.
local function now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- purge drops the entries whose lease has lapsed.
local function purge(order, leases, t)
  local gone = redis.call('ZRANGEBYSCORE', leases, '-inf', t)
  for _, id in ipairs(gone) do
    redis.call('ZREM', order, id)
  end
  if #gone > 0 then
    redis.call('ZREMRANGEBYSCORE', leases, '-inf', t)
  end
end

-- head is the oldest entry other than the caller's own (id at wait start
-- since): its wait start and id, or nil. An entry of the caller's Client at
-- another wait start is another waiter of that Client, and counts.
-- An entry with no lease (written by something other than these scripts)
-- would never lapse: it is dropped when it comes to the head.
local function head(order, id, since, leases)
  local h = redis.call('ZRANGE', order, 0, 1, 'WITHSCORES')
  while h[1] and not redis.call('ZSCORE', leases, h[1]) do
    redis.call('ZREM', order, h[1])
    h = redis.call('ZRANGE', order, 0, 1, 'WITHSCORES')
  end
  if h[1] == id and tonumber(h[2]) == tonumber(since) then
    return h[4], h[3]
  end
  return h[2], h[1]
end

-- enter puts id's entry at wait start since, leased until t + lease, and
-- keeps both sets until the longest lease ends.
local function enter(order, leases, since, id, t, lease)
  redis.call('ZADD', order, since, id)
  redis.call('ZADD', leases, t + lease, id)
  if redis.call('PTTL', order) < lease then
    redis.call('PEXPIRE', order, lease)
    redis.call('PEXPIRE', leases, lease)
  end
end

-- withdraw removes id's entry if its wait start is since, and reports
-- whether it did.
local function withdraw(order, leases, since, id)
  if tonumber(redis.call('ZSCORE', order, id) or '-1') ~= tonumber(since) then
    return false
  end
  redis.call('ZREM', order, id)
  redis.call('ZREM', leases, id)
  return true
end

-- older reports whether (s1, id1) waited longer than (s2, id2).
local function older(s1, id1, s2, id2)
  s1, s2 = tonumber(s1), tonumber(s2)
  return s1 < s2 or (s1 == s2 and id1 < id2)
end

-- announce tells the head of the waiting set, on its Client's channel
-- for the key, that the key was released here: the released value and the
-- head ("value since id"); the head wakes once a quorum of nodes did. It
-- returns that message ("value" when nobody waits, and nothing is
-- published). The value tells a release heard twice (see release.lua) from
-- the next one.
local function announce(key, order, leases, value)
  purge(order, leases, now())
  local s, id = head(order, '', '', leases)
  if not s then
    return value
  end
  local msg = value .. ' ' .. s .. ' ' .. id
  redis.call('PUBLISH', 'fencedlock:released:' .. id .. ':' .. key, msg)
  return msg
end
