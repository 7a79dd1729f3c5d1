-- Cancel a workflow (see flow.lua): every step that has not started is cancelled (tracking.lua's
-- track.cancel; steps waiting on a cancelled one end cancelled too), every running step has its
-- cancel requested (it ends cancelled, whatever it does), and a failed step's record, kept to let it
-- run again, expires. The workflow ends as cancelled and expires ttl seconds from now (or once its
-- last running step ended).
-- KEYS: flow
-- ARGV: cancels_suffix
-- cancels_suffix: what a queue's cancels channel adds to its name (wire/keys.py's CANCELS_SUFFIX): a
-- step's queue is read from its record key
-- uses: tracking
-- Returns {cancelled, running, status}: how many steps it cancelled, how many were running or being
-- taken by a worker (their cancel requested), and the workflow's status before; cancelled is -1 if
-- there is no such workflow, -2 if it had ended.
local status = redis.call('hget', KEYS[1], 'status')
if not status then
    return {-1, 0, ''}
elseif status == 'done' or status == 'cancelled' then
    return {-2, 0, status}
end
local track = tracking('')
redis.call('hset', KEYS[1], 'status', 'cancelled', 'finished', track.now())
local left, running = tonumber(redis.call('hget', KEYS[1], 'left')), 0
for key in string.gmatch(redis.call('hget', KEYS[1], 'steps'), '[^\n]+') do
    local queue = string.sub(key, 1, #key - 38)  -- a record key is <queue>_task:<32 hex digits>
    local outcome, was = track.cancel(key, queue, queue .. '_noti', queue .. '_scheduled', queue .. ARGV[1])
    if outcome == 'requested' then
        running = running + 1
    elseif was == 'failed' or was == 'dead' then
        redis.call('expire', key, redis.call('hget', key, 'ttl'))
    end
end
redis.call('expire', KEYS[1], redis.call('hget', KEYS[1], 'ttl'))
-- every step it cancelled ended (and counted in left), whether cancelled here or as a step after one
return {left - tonumber(redis.call('hget', KEYS[1], 'left')), running, status}
