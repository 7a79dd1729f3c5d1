-- Limits per key (the tasks' rate_limit, concurrency_limit and limit_key options): the functions every
-- script that ends a hold shares (scripts.py puts this file before each script that declares
-- `-- uses: limits`), and admit.lua's. A queue Q keeps, per limit key K (delayed/wire/keys.py names them):
--   Q_limits            hash: K -> the limits its tasks carried when one was last admitted, as JSON
--   Q_limit_holders     hash: worker id -> the K whose concurrency slot that id holds
--   Q_limit_running:K   set: the worker ids holding K's slots (as many as its concurrency_limit)
--   Q_limit_waiting:K   list: the blobs K's concurrency_limit held back at their claim, oldest first
--   Q_limit_starts:K    sorted set: K's starts within its rate_limit's period (score: unix ms by Redis's
--                       clock), and the starts reserved for the blobs its rate held back, at their due time
--   Q_limit_reserved:K  sorted set: those reserved starts not taken yet (members and scores as in
--                       Q_limit_starts:K); the next claim of K once one is due takes it (admit.lua)
-- A slot is held from the admission of a claimed task (admit.lua) until the script that ends its hold
-- (claim_batch's releases, requeue, reschedule, bury, give_back, requeue_lost's sweep) frees it in the
-- same call: no crash falls between the end of a task and the slot it frees.
local limits = {}

-- Move up to count blobs waiting for a slot of one limit key (its waiting list) to the head of the queue,
-- the oldest first, each with its notification. Returns how many moved.
function limits.wake(waiting, name, noti, count)
    local woken = {}
    for _ = 1, count do
        local blob = redis.call('lpop', waiting)
        if not blob then
            break
        end
        woken[#woken + 1] = blob
    end
    for i = #woken, 1, -1 do
        redis.call('lpush', name, woken[i])
        redis.call('lpush', noti, '1')
    end
    return #woken
end

-- Whether any id of the queue holds a slot (holders: its limit_holders): one EXISTS.
function limits.holding(holders)
    return redis.call('exists', holders) == 1
end

-- The holds of ids ended in this call (their processing fields deleted): free each slot one of them
-- held, and for each slot freed move one blob waiting for a slot of its key to the head of the queue.
-- holders: the queue's limit_holders; running_prefix, waiting_prefix: QueueKeys.limit_running_prefix
-- and limit_waiting_prefix; name, noti: the queue's.
function limits.free(holders, running_prefix, waiting_prefix, name, noti, ids)
    local keys, freed, order = redis.call('hmget', holders, unpack(ids)), {}, {}
    for i, key in ipairs(keys) do
        if key then
            redis.call('hdel', holders, ids[i])
            if redis.call('srem', running_prefix .. key, ids[i]) == 1 then
                if not freed[key] then
                    freed[key] = 0
                    order[#order + 1] = key
                end
                freed[key] = freed[key] + 1
            end
        end
    end
    for _, key in ipairs(order) do
        limits.wake(waiting_prefix .. key, name, noti, freed[key])
    end
end

-- limits.free, for a script that ends holds one way: one EXISTS while no id holds a slot.
function limits.freed(holders, running_prefix, waiting_prefix, name, noti, ids)
    if #ids > 0 and limits.holding(holders) then
        limits.free(holders, running_prefix, waiting_prefix, name, noti, ids)
    end
end
