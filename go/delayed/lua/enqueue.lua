-- Append tasks and one notification each, atomically, in one command
-- (used for single tasks: unpack() takes no more than a few thousand values).
-- KEYS: name noti counts
-- ARGV: blobs...
-- counts: adds the tasks to 'enqueued'
redis.call('rpush', KEYS[1], unpack(ARGV))
local notifications = {}
for i = 1, #ARGV do
    notifications[i] = '1'
end
redis.call('hincrby', KEYS[3], 'enqueued', #ARGV)
return redis.call('rpush', KEYS[2], unpack(notifications))
