-- Return claimed tasks a stopping worker will not start to the head of the
-- queue, in their order, with their notifications, releasing them.
-- A task is returned only if its id still holds exactly that blob.
-- A tracked task's record (see tracking.lua) says pending again, its claim not counted as a run.
-- KEYS[1] queue list, KEYS[2] notification list, KEYS[3] processing hash, KEYS[4] the queue's tracked marker
-- ARGV[1] record key prefix, then id1, blob1, id2, blob2, ... in queue order
-- Returns the number of tasks returned.
local count = 0
local track = redis.call('exists', KEYS[4]) == 1 and tracking(ARGV[1])
for i = #ARGV - 1, 2, -2 do
    if redis.call('hget', KEYS[3], ARGV[i]) == ARGV[i + 1] then
        redis.call('hdel', KEYS[3], ARGV[i])
        redis.call('lpush', KEYS[1], ARGV[i + 1])
        redis.call('lpush', KEYS[2], '1')
        count = count + 1
        local key = track and track.key(ARGV[i + 1])
        if key then
            track.pending(key, ARGV[i + 1], true)
        end
    end
end
return count
