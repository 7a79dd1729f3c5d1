-- How long the task at the head of the queue has waited (reads only): measured if it is tracked,
-- since its record's 'due' (a scheduled task come due, or a retry), else 'enqueued' (see
-- tracking.lua); else at least since a sweep first saw it at the head, if head_since names it (the
-- sha1 of the head it noted is this head's: see notify_missing.lua).
-- KEYS: name tracked head_since
-- ARGV: task_prefix
-- uses: tracking
-- Returns {'tracked', since, now} (unix times as strings, now from Redis's clock), {'seen', since in
-- unix ms, now}, or false: the queue is empty, or nothing says since when its head waits.
local head = redis.call('lindex', KEYS[1], 0)
if not head then
    return false
end
local time = redis.call('time')
local now = string.format('%d.%06d', time[1], time[2])
local key = redis.call('exists', KEYS[2]) == 1 and tracking(ARGV[1]).key(head)
if key then
    local since = redis.call('hget', key, 'due') or redis.call('hget', key, 'enqueued')
    if since then
        return {'tracked', since, now}
    end
end
local seen, since_ms = string.match(redis.call('get', KEYS[3]) or '', '^(%x+):(%d+)$')
if seen == redis.sha1hex(head) then
    return {'seen', since_ms, now}
end
return false
