-- Returns the entries of ARGV ("COMMAND [ARG...]", space-separated) that
-- the calling user may not run, as the server's ACLs say. An unknown
-- command counts as denied.
if redis.acl_check_cmd == nil then
  return redis.error_reply('ERR redis.acl_check_cmd is missing (Redis before 7)')
end
local denied = {}
for _, entry in ipairs(ARGV) do
  local argv = {}
  for word in string.gmatch(entry, '%S+') do
    table.insert(argv, word)
  end
  local ok, allowed = pcall(redis.acl_check_cmd, unpack(argv))
  if not ok or not allowed then
    table.insert(denied, entry)
  end
end
return denied
