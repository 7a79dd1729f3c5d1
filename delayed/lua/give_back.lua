-- Return claimed tasks a stopping worker will not start to the head of the
-- queue, in their order, with their notifications, releasing them.
-- A task is returned only if its id still holds exactly that blob.
-- KEYS[1] queue list, KEYS[2] notification list, KEYS[3] processing hash
-- ARGV: id1, blob1, id2, blob2, ... in queue order
-- Returns the number of tasks returned.
local count = 0
for i = #ARGV - 1, 1, -2 do
    if redis.call('hget', KEYS[3], ARGV[i]) == ARGV[i + 1] then
        redis.call('hdel', KEYS[3], ARGV[i])
        redis.call('lpush', KEYS[1], ARGV[i + 1])
        redis.call('lpush', KEYS[2], '1')
        count = count + 1
    end
end
return count
