-- Move tasks that are due from the scheduled set to the queue, with their
-- notifications, atomically; at most limit per call so a burst never blocks Redis long.
-- KEYS: scheduled name noti
-- ARGV: now limit
-- Returns how many were moved.
local due = redis.call('zrangebyscore', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #due == 0 then
    return 0
end
local blobs, notifications = {}, {}
for i, member in ipairs(due) do
    blobs[i] = string.sub(member, 9)
    notifications[i] = '1'
end
redis.call('zrem', KEYS[1], unpack(due))
redis.call('rpush', KEYS[2], unpack(blobs))
redis.call('rpush', KEYS[3], unpack(notifications))
return #due
