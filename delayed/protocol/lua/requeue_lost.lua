-- One chunk of the sweeper's pass, with go-delayed's semantics: a task held by a worker whose
-- keep-alive key is gone goes back to the tail of the queue with a notification.
-- When crashes are counted (ARGV[1] is "1"), a task one of our workers on this queue (ids made of
-- ARGV[2], hex digits, maybe "-" and a number, then ARGV[4]: see keys.py) died holding stays where
-- it is and is returned instead. The caller counts the crash in the task itself and calls again
-- with, for that id, the blob it held and the blob to requeue it as (requeued only if the id still
-- holds that blob), or dead-letters it (bury.lua). A go-delayed worker never releases its last
-- task, so every clean stop of one leaves a task under a dead id, and that is not a crash.
-- The caller hands the holders over a chunk at a time, so no call does more than a chunk's work.
-- KEYS[1] queue list, KEYS[2] notification list, KEYS[3] processing hash,
-- KEYS[4] the queue's tracked marker: a tracked task it requeues is pending again (see tracking.lua;
-- its record, named after the queue, is in the queue's slot but not declared: the ids holding tasks
-- are read before the sweep, their blobs are not),
-- KEYS[5 ..] ids that held tasks when the caller read the processing hash: each is a field of it and
-- that worker's keep-alive key, so every key the script reads is declared (Redis Cluster)
-- ARGV[1] "1" to return our dead workers' tasks, "0" to requeue them too, ARGV[2] our worker ids'
-- prefix, ARGV[3] record key prefix, ARGV[4] what our worker ids on this queue end with,
-- ARGV[5 ..] (a call that requeues counted crashes) per id of KEYS[5 ..]: the blob it held, the
-- blob to requeue it as
-- Returns {how many tasks it requeued, then per task of ours left in place: worker id, blob}.
local counting, prefix, suffix = ARGV[1] == '1', ARGV[2], ARGV[4]
local track = redis.call('exists', KEYS[4]) == 1 and tracking(ARGV[3])

local function ours(worker_id)
    local last = #worker_id - #suffix
    if string.sub(worker_id, 1, #prefix) ~= prefix or string.sub(worker_id, last + 1) ~= suffix then
        return false
    end
    local body = string.sub(worker_id, #prefix + 1, last)
    return string.find(body, '^%x+$') ~= nil or string.find(body, '^%x+%-%d+$') ~= nil
end

local reply = {0}

local function requeue(worker_id, blob)
    redis.call('hdel', KEYS[3], worker_id)  -- first: a write that frees memory (see claim_batch.lua)
    redis.call('rpush', KEYS[1], blob)
    redis.call('rpush', KEYS[2], '1')
    reply[1] = reply[1] + 1
    local key = track and track.key(blob)
    if key then
        track.pending(key, blob, false)
    end
end

for i = 5, #KEYS do
    local worker_id, held, again = KEYS[i], ARGV[2 * i - 5], ARGV[2 * i - 4]
    local task = redis.call('hget', KEYS[3], worker_id)
    if task and not redis.call('get', worker_id) then
        if again then
            if task == held then
                requeue(worker_id, again)
            end
        elseif counting and ours(worker_id) then
            reply[#reply + 1] = worker_id
            reply[#reply + 1] = task
        else
            requeue(worker_id, task)
        end
    end
end
return reply
