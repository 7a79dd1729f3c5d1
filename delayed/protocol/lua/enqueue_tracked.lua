-- Enqueue (or schedule) tracked tasks, each with its record, atomically (see tracking.lua); sets the
-- queue's tracked marker, so claims look for tracked tasks from now on.
-- KEYS[1] queue list, KEYS[2] notification list, KEYS[3] scheduled sorted set, KEYS[4] counts hash
-- (adds the tasks to 'enqueued'), KEYS[5] the queue's tracked marker, KEYS[6..] the tasks' records
-- ARGV[1] seconds a record is kept once its task ended, ARGV[2] due (unix seconds) or '' for now,
-- then per task: its func path, its blob, its scheduled-set member ('' for now)
-- Returns the number of tasks enqueued.
redis.call('set', KEYS[5], '1')
local track = tracking('')
local count = 0
for i = 3, #ARGV, 3 do
    count = count + 1
    local func, blob, member = ARGV[i], ARGV[i + 1], ARGV[i + 2]
    if ARGV[2] == '' then
        redis.call('rpush', KEYS[1], blob)
        redis.call('rpush', KEYS[2], '1')
    else
        redis.call('zadd', KEYS[3], ARGV[2], member)
    end
    track.enqueued(KEYS[5 + count], func, ARGV[1], blob, ARGV[2], member)
end
redis.call('hincrby', KEYS[4], 'enqueued', count)
return count
