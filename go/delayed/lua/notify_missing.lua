-- Top the notification list up to the length of the queue (go-delayed's sweep does), and drop our
-- workers whose keep-alive lapsed from the queue's workers set.
-- Unlike go-delayed, notifications are topped up only once the queue's head has stood still for
-- still_ms: a worker between its BLPOP and its dequeue also leaves a task without a notification,
-- for a round trip, and a notification pushed for that task would wake a worker with no task behind
-- it (go-delayed's dequeue then errors and backs off 1 s, 2 s, ...). At most limit are pushed per
-- call, so that no call keeps Redis busy for long: the caller calls again while some are missing.
-- It also notes in head_since ("<sha1 of the head>:<unix ms first seen>") since when the task at the
-- head of the queue has stood there untaken, for `delayed stats` to flag a GoTask no Go worker takes.
-- The first write frees memory (lapsed workers), so that a full Redis (maxmemory, noeviction) still
-- lets the script push: Redis refuses a script's first write that would grow memory, not the later ones.
-- KEYS: name noti unnotified workers head_since
-- ARGV: still_ms limit now
-- unnotified: "<sha1 of the queue's head>:<unix ms first seen>"; still_ms: how long the head must
-- stand still; limit: most notifications to push; now: unix seconds
-- Returns {notifications pushed, notifications still missing}.
redis.call('zremrangebyscore', KEYS[4], '-inf', ARGV[3])
local clock = redis.call('time')
local now_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local first = redis.call('lindex', KEYS[1], 0)
local head = first and redis.sha1hex(first)
if not head then
    redis.call('del', KEYS[5])
elseif string.match(redis.call('get', KEYS[5]) or '', '^(%x+):') ~= head then
    redis.call('set', KEYS[5], head .. ':' .. now_ms)
end
local deficit = redis.call('llen', KEYS[1]) - redis.call('llen', KEYS[2])
if deficit <= 0 then
    redis.call('del', KEYS[3])
    return {0, 0}
end
local seen, since = string.match(redis.call('get', KEYS[3]) or '', '^(%x+):(%d+)$')
if seen ~= head then
    since = now_ms
    redis.call('set', KEYS[3], head .. ':' .. now_ms)
end
if now_ms - tonumber(since) < tonumber(ARGV[1]) then
    return {0, deficit}
end
local pushed = math.min(deficit, tonumber(ARGV[2]))
local left = pushed
while left > 0 do  -- in chunks: Lua's unpack() fails past a few thousand values
    local chunk = {}
    for i = 1, math.min(left, 1000) do
        chunk[i] = '1'
    end
    redis.call('lpush', KEYS[2], unpack(chunk))
    left = left - #chunk
end
if pushed == deficit then
    redis.call('del', KEYS[3])
end
return {pushed, deficit - pushed}
