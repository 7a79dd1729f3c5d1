-- Run a scheduled task now, or delete it, named exactly: the member of the scheduled set with this
-- due time (its score), this 8-byte prefix (its nonce) and this sha1 of the whole member. Run now
-- moves it into the queue with its notification, as moving due tasks does; delete removes it. Both
-- only while that member is still there: a move of due tasks, a cancel or another operator may have
-- taken it, and then nothing changes (no notification is pushed without its task, none is left
-- without one). A tracked task's record follows, if it names this member: run now makes a scheduled
-- task pending (a retrying one stays retrying, due now); delete ends it as cancelled.
-- KEYS: scheduled name noti
-- ARGV: action due nonce digest task_prefix
-- uses: tracking
-- action: 'run' or 'delete'
-- Returns 1 if it was run or deleted, 0 if the member is gone.
local member, offset = nil, 0
repeat
    local page = redis.call('zrangebyscore', KEYS[1], ARGV[2], ARGV[2], 'limit', offset, 100)
    for _, candidate in ipairs(page) do
        if string.sub(candidate, 1, 8) == ARGV[3] and redis.sha1hex(candidate) == ARGV[4] then
            member = candidate
            break
        end
    end
    offset = offset + 100
until member or #page < 100
if not member then
    return 0
end
redis.call('zrem', KEYS[1], member)
local blob = string.sub(member, 9)
local running = ARGV[1] == 'run'
if running then
    redis.call('rpush', KEYS[2], blob)
    redis.call('rpush', KEYS[3], '1')
end
local track = tracking(ARGV[5])
local key = track.key(blob)
if key and redis.call('hget', key, 'nonce') == ARGV[3] then
    local status = redis.call('hget', key, 'status')
    if not running then
        track.ended(key, 'cancelled')
    elseif status == 'scheduled' then
        track.pending(key, blob)
    else
        redis.call('hset', key, 'due', track.now())
        redis.call('hdel', key, 'nonce')
    end
end
return 1
