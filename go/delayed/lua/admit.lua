-- Admit a claimed task under its limits, or hold it back, atomically for every worker of the queue,
-- Python and Go (limits.lua has the keys). The worker that claimed it calls this once it decoded it,
-- just before its call: a limit protects what a task calls when it starts, so it is decided then, by
-- Redis's clock, seeing every worker's starts, the backlog, and retries alike.
-- Fenced: nothing happens unless the worker's id still holds the blob it claimed. An id that holds a
-- slot of the key already was admitted (a call whose reply was lost, asked again); a rate_limit alone
-- cannot tell, and counts such a start twice.
-- concurrency: the id takes a slot of the key while fewer ids hold one than the limit (holders whose
-- id holds no task any more, left by a sweeper that frees no slot, such as go-delayed's, are dropped
-- first, and the blobs waiting for the slots they held are woken); else the blob waits, out of the
-- queue, at the tail of the key's waiting list until a slot frees (limits.freed).
-- rate ("N starts per period"): a claim takes a start reserved for a held task that is due (logged
-- already), else the start is taken, and logged, while fewer than N starts fall in the last period and
-- no reservation is still to come; else the blob waits in the scheduled set (kind 'l') until the first
-- start free for it: a period after the Nth latest start, and period/N after the latest reservation, so
-- the held blobs start at the rate rather than all at once. That start is logged (in the future) and
-- reserved. Reservations are the key's, not a blob's (its tasks are alike to the limit): a held blob
-- comes back when its start is due and takes a due one, so it leaves the queue and comes back once,
-- unless a task of the key claimed in between took that start (then it waits for the next); a
-- reservation not taken within a period of its time has left the window, and is dropped.
-- The registry (limits) says the key's limits, as JSON, for people.
-- A task held back did not start: a tracked task's record says pending (waiting for a slot) or
-- scheduled, its claim not counted as a run.
-- KEYS: name noti processing scheduled limit_holders limits running waiting starts reserved record...
-- ARGV: worker_id blob limit_key rate_limit rate_count period_ms concurrency nonce
-- running, waiting, starts, reserved: the limit key's (QueueKeys.limit_running and the rest); record:
-- a tracked task's; rate_limit: the option's text ('' for none), rate_count and period_ms what it says
-- (0 for none); concurrency: the concurrency_limit (0 for none); nonce: the scheduled-set member's
-- nonce if it is held for its rate (kind 'l', see delayed/wire/keys.py's scheduled_nonce).
-- uses: tracking limits
-- Returns {'admitted'}, {'waiting'} (held for a slot), {'scheduled', due} (held for its rate; due in
-- unix seconds) or {'fenced'} (the id no longer holds the blob: nothing done).
local worker_id, blob, key = ARGV[1], ARGV[2], ARGV[3]
if redis.call('hget', KEYS[3], worker_id) ~= blob then
    return {'fenced'}
end
local rate_count, period, concurrency = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local clock = redis.call('time')
local now = tonumber(clock[1]) * 1000 + tonumber(clock[2]) / 1000  -- unix ms

local function ms(value)  -- a time as a score or member part: Lua's own text of a number rounds it
    return string.format('%.3f', value)
end

local seen = {seen = tonumber(clock[1])}
if rate_count > 0 then
    seen.rate_limit, seen.period = ARGV[4], period / 1000
end
if concurrency > 0 then
    seen.concurrency_limit = concurrency
end
redis.call('hset', KEYS[6], key, cjson.encode(seen))

local function hold(due, member, held)
    redis.call('hdel', KEYS[3], worker_id)
    if KEYS[11] then
        tracking('').held(KEYS[11], due, member, held)
    end
end

-- Whether the id may take a slot: fewer holders than the limit, once those holding no task are dropped.
local function slot_free()
    local running = KEYS[7]
    local holders = redis.call('scard', running)
    if holders < concurrency then
        return true
    end
    local dropped = 0
    for _, holder in ipairs(redis.call('smembers', running)) do
        if redis.call('hexists', KEYS[3], holder) == 0 then
            redis.call('srem', running, holder)
            if redis.call('hget', KEYS[5], holder) == key then
                redis.call('hdel', KEYS[5], holder)
            end
            dropped = dropped + 1
        end
    end
    local spare = concurrency - (holders - dropped) - 1  -- the slots free once this task took one
    if spare < 0 then
        return false
    end
    if spare > 0 then
        limits.wake(KEYS[8], KEYS[1], KEYS[2], spare)
    end
    return true
end

-- Take a start of the key: one reserved earlier for a held task that is due now (its start is in the
-- log already), else one now if the log has room and no reservation is still to come; else hold the
-- task: the unix ms of the start reserved for it.
local function start()
    local starts, reserved = KEYS[9], KEYS[10]
    local gone = ms(now - period)  -- a start at or before this has left the window
    redis.call('zremrangebyscore', starts, '-inf', gone)
    redis.call('zremrangebyscore', reserved, '-inf', gone)  -- a reservation so late is a start no more
    local due = redis.call('zrangebyscore', reserved, '-inf', ms(now), 'LIMIT', 0, 1)
    if due[1] then
        redis.call('zrem', reserved, due[1])
        return nil
    end
    local last = redis.call('zrange', reserved, -1, -1, 'withscores')  -- the latest start still to come
    local started = redis.call('zcard', starts)
    if started < rate_count and not last[1] then
        redis.call('zadd', starts, ms(now), ms(now) .. ':' .. worker_id)
        redis.call('pexpireat', starts, math.ceil(now + period))
        return nil
    end
    local at = now
    if last[1] then
        at = math.max(at, tonumber(last[2]) + period / rate_count)
    end
    if started >= rate_count then
        local nth = redis.call('zrange', starts, -rate_count, -rate_count, 'withscores')
        at = math.max(at, tonumber(nth[2]) + period)
    end
    local member = string.format('%.6f:%s', at, worker_id)
    redis.call('zadd', starts, ms(at), member)
    redis.call('pexpireat', starts, math.ceil(at + period))
    redis.call('zadd', reserved, ms(at), member)
    redis.call('pexpireat', reserved, math.ceil(at + period))
    return at
end

if concurrency > 0 and redis.call('sismember', KEYS[7], worker_id) == 1 then
    return {'admitted'}  -- admitted already: a worker asking again after the reply was lost
end
if concurrency > 0 and not slot_free() then
    redis.call('rpush', KEYS[8], blob)
    hold('', '', KEYS[8])
    return {'waiting'}
end
if rate_count > 0 then
    local due = start()
    if due then
        local member, seconds = ARGV[8] .. blob, string.format('%.6f', due / 1000)
        redis.call('zadd', KEYS[4], seconds, member)
        hold(seconds, member, '')
        return {'scheduled', seconds}
    end
end
if concurrency > 0 then
    redis.call('sadd', KEYS[7], worker_id)
    redis.call('hset', KEYS[5], worker_id, key)
end
return {'admitted'}
