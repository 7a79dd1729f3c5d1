-- How long the task at the head of the queue has waited, if it is tracked (reads only): since its
-- record's 'due' (a scheduled task come due, or a retry), else since 'enqueued' (see tracking.lua).
-- KEYS: name
-- ARGV: task_prefix
-- uses: tracking
-- Returns {since, now} (unix times as strings, now from Redis's clock), or false: the queue is
-- empty, its head is untracked, or the head's record is gone.
local head = redis.call('lindex', KEYS[1], 0)
if not head then
    return false
end
local key = tracking(ARGV[1]).key(head)
if not key then
    return false
end
local since = redis.call('hget', key, 'due') or redis.call('hget', key, 'enqueued')
if not since then
    return false
end
local time = redis.call('time')
return {since, string.format('%d.%06d', time[1], time[2])}
