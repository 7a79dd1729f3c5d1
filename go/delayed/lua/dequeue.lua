-- Claim the task at the head of the queue for a worker.
-- A paused queue (its paused key exists) gives no task: the notification taken for it is put back.
-- A tracked task's record (see tracking.lua) says running (undeclared, as in claim_batch.lua).
-- KEYS: name processing noti paused tracked
-- ARGV: worker_id task_prefix
-- uses: tracking
-- Returns the blob, or false when the queue is empty (go-delayed tests
-- `task == nil`, which never holds in Redis Lua, and then HSETs false).
-- A worker that lost the reply to its last claim asks again with the same id:
-- it gets the task it holds back instead of overwriting it (go-delayed's HSET
-- would drop that task).
local held = redis.call('hget', KEYS[2], ARGV[1])
if held then
    return held
end
if redis.call('exists', KEYS[4]) == 1 then
    redis.call('lpush', KEYS[3], '1')
    return false
end
local task = redis.call('lpop', KEYS[1])
if not task then
    return false
end
redis.call('hset', KEYS[2], ARGV[1], task)
if redis.call('exists', KEYS[5]) == 1 then
    local track = tracking(ARGV[2])
    local key = track.key(task)
    if key then
        track.running(key, ARGV[1])
    end
end
return task
