-- Cancel a tracked task that waits (scheduled, pending or retrying): remove it from the scheduled
-- set, or from the queue with one notification, and end its record as cancelled (see tracking.lua).
-- A task in the queue is removed only if a notification is left for it: a worker (ours or
-- go-delayed's) between its BLPOP and its pop of the queue's head takes one of the first
-- (tasks - notifications) tasks; removing one of those would leave that worker a notification
-- without a task (go-delayed's dequeue then errors and backs off). Such a task is being taken.
-- KEYS: name noti scheduled record
-- uses: tracking
-- Returns {outcome, the record's status}: outcome 'cancelled', 'missing' (no record), 'not_waiting'
-- (it runs or ended), 'taking' (a worker is taking it), or 'lost' (the record says it waits but it
-- is nowhere to be found: a worker that does not track took it).
local status = redis.call('hget', KEYS[4], 'status')
if not status then
    return {'missing', ''}
end
if status ~= 'scheduled' and status ~= 'pending' and status ~= 'retrying' then
    return {'not_waiting', status}
end
local blob, nonce = redis.call('hget', KEYS[4], 'blob'), redis.call('hget', KEYS[4], 'nonce')
if not blob then
    return {'lost', status}
end
if not (nonce and redis.call('zrem', KEYS[3], nonce .. blob) == 1) then
    local at = redis.call('lpos', KEYS[1], blob)
    if not at then
        return {'lost', status}
    end
    if at < redis.call('llen', KEYS[1]) - redis.call('llen', KEYS[2]) then
        return {'taking', status}
    end
    redis.call('lrem', KEYS[1], 1, blob)
    redis.call('lpop', KEYS[2])
end
tracking('').ended(KEYS[4], 'cancelled')
return {'cancelled', status}
