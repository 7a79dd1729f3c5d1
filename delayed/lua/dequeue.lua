-- Claim the task at the head of the queue for a worker.
-- KEYS[1] queue list, KEYS[2] processing hash
-- ARGV[1] worker id
-- Returns the blob, or false when the queue is empty (go-delayed tests
-- `task == nil`, which never holds in Redis Lua, and then HSETs false).
local task = redis.call('lpop', KEYS[1])
if not task then
    return false
end
redis.call('hset', KEYS[2], ARGV[1], task)
return task
