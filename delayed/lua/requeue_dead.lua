-- Move dead letters back into the queue, atomically each: a record is removed from the
-- dead-letter list and its task pushed with a notification, or nothing happens (someone
-- else requeued or purged it first).
-- KEYS[1] dead-letter list, KEYS[2] queue list, KEYS[3] notification list
-- ARGV: record1, blob1, record2, blob2, ... (the exact record bytes, and the task it holds)
-- Returns how many were requeued.
local count = 0
for i = 1, #ARGV, 2 do
    if redis.call('lrem', KEYS[1], 1, ARGV[i]) == 1 then
        redis.call('rpush', KEYS[2], ARGV[i + 1])
        redis.call('rpush', KEYS[3], '1')
        count = count + 1
    end
end
return count
