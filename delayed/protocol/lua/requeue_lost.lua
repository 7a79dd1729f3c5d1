-- One chunk of the sweeper's pass, with go-delayed's semantics: a task held by a worker whose
-- keep-alive key is gone goes back to the tail of the queue with a notification.
-- When crashes are counted (counting is "1"), a task one of our workers on this queue (ids made of
-- worker_id_prefix, hex digits, maybe "-" and a number, then worker_id_suffix: see wire/keys.py) died holding stays where
-- it is and is returned instead. The caller counts the crash in the task itself and calls again
-- with, for that id, the blob it held and the blob to requeue it as (requeued only if the id still
-- holds that blob), or dead-letters it (bury.lua). A go-delayed worker never releases its last
-- task, so every clean stop of one leaves a task under a dead id, and that is not a crash.
-- The caller hands the holders over a chunk at a time, so no call does more than a chunk's work.
-- A task requeued frees the limit slot its dead worker's id held, and a blob waiting for that slot goes
-- to the head of the queue (limits.lua): a worker killed while it ran a task frees its slot once its
-- keep-alive lapsed.
-- KEYS: name noti processing tracked limit_holders holders...
-- ARGV: counting worker_id_prefix task_prefix worker_id_suffix limit_running_prefix limit_waiting_prefix rewrites...
-- tracked: a tracked task it requeues is pending again, or ends cancelled if its cancel was requested
-- while its worker held it (see tracking.lua's track.pending; its record, named after
-- the queue, is in the queue's slot but not declared: the ids holding tasks are read before the
-- sweep, their blobs are not); holders: ids that held tasks when the caller read the processing
-- hash, each a field of it and that worker's keep-alive key, so every key the script reads is
-- declared (Redis Cluster); counting: "1" to return our dead workers' tasks, "0" to requeue them
-- too; rewrites: (a call that requeues counted crashes) per holder, the blob it held and the blob
-- to requeue it as
-- uses: tracking limits
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
local ended = {}

local function requeue(worker_id, blob)
    redis.call('hdel', KEYS[3], worker_id)  -- first: a write that frees memory (see claim_batch.lua)
    ended[#ended + 1] = worker_id
    local key = track and track.key(blob)
    if key and not track.pending(key, blob, false) then
        return  -- cancelled while its worker held it: it ends here
    end
    redis.call('rpush', KEYS[1], blob)
    redis.call('rpush', KEYS[2], '1')
    reply[1] = reply[1] + 1
end

for i = 6, #KEYS do
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
limits.freed(KEYS[5], ARGV[5], ARGV[6], KEYS[1], KEYS[2], ended)
return reply
