-- Return claimed tasks a stopping worker will not start to the head of the
-- queue, in their order, with their notifications, releasing them.
-- A task is returned only if its id still holds exactly that blob.
-- A tracked task's record (see tracking.lua) says pending again, its claim not counted as a run; one
-- whose cancel was requested while it was held is not returned: it ends cancelled.
-- A limit slot an id held (admitted, not started) is freed, and a blob waiting for it goes to the head
-- of the queue, before the tasks given back (limits.lua).
-- KEYS: name noti processing limit_holders records...
-- ARGV: limit_running_prefix limit_waiting_prefix held...
-- records: those of the tracked tasks among them; held: per task in queue order, its id, its blob,
-- and the index in KEYS of its record (0: untracked)
-- uses: tracking limits
-- Returns the number of tasks returned.
local count = 0
local track = #KEYS > 4 and tracking('')
local ended = {}
for i = #ARGV - 2, 3, -3 do
    if redis.call('hget', KEYS[3], ARGV[i]) == ARGV[i + 1] then
        redis.call('hdel', KEYS[3], ARGV[i])
        ended[#ended + 1] = ARGV[i]
        local record = tonumber(ARGV[i + 2])
        if record == 0 or track.pending(KEYS[record], ARGV[i + 1], true) then
            redis.call('lpush', KEYS[1], ARGV[i + 1])
            redis.call('lpush', KEYS[2], '1')
            count = count + 1
        end
    end
end
limits.freed(KEYS[4], ARGV[1], ARGV[2], KEYS[1], KEYS[2], ended)
return count
