-- Release a hold: delete the key only while it holds this value. The fence
-- counter is never deleted.
-- KEYS[1] lock key; ARGV[1] value, ARGV[2] release channel or '', ARGV[3]
-- the id of the Client whose turn it is next, or '' (optional)
-- An Unlock announces the release on the channel (the message is the
-- released value, then a space and the next Client's id when one is named),
-- which wakes waiters; an attempt that failed and steps back from its
-- partial grants does not: waking the herd for a key that a contender is
-- about to take splits the votes again.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if ARGV[2] ~= '' then
    local msg = ARGV[1]
    if ARGV[3] and ARGV[3] ~= '' then
      msg = msg .. ' ' .. ARGV[3]
    end
    redis.call('PUBLISH', ARGV[2], msg)
  end
  return 1
end
return 0
