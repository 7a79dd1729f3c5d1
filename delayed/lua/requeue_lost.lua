-- The sweeper's pass, with go-delayed's semantics: top the notification list
-- up to the length of the queue, and move every task held by a worker whose
-- keep-alive key is gone back to the tail of the queue with a notification.
-- Ours also finds crash loops: it counts, per blob digest, how often a task's
-- worker died holding it, and past the limit leaves the task where it is, under
-- the dead worker's id, and returns it: the caller dead-letters it with the fenced
-- bury script (a caller that dies first leaves it for the next sweep, which counts
-- one more crash and returns it again).
-- Only our workers' deaths count (ids starting with ARGV[4]): a go-delayed worker
-- never releases its last task, so every clean stop of one leaves a task behind
-- under a dead id, and that is not a crash.
-- KEYS[1] queue list, KEYS[2] notification list, KEYS[3] processing hash,
-- KEYS[4] crash counts hash (digest -> "count:last seen"),
-- KEYS[5] our workers sorted set (entries whose keep-alive lapsed are dropped here),
-- KEYS[6] the unnotified marker ("<sha1 of the queue's head>:<unix ms first seen>"),
-- KEYS[7] the queue's tracked marker: a tracked task it requeues is pending again (see tracking.lua;
-- its record, named after the queue, is in the queue's slot but not declared: the ids holding tasks
-- are read before the sweep, their blobs are not),
-- KEYS[8 ..] the ids holding tasks when the caller read the processing hash: each is a field of
-- it and that worker's keep-alive key, so every key the script reads is declared (Redis Cluster)
-- ARGV[1] most crashes a task may cause (0: count nothing, quarantine nothing),
-- ARGV[2] now (unix seconds), ARGV[3] seconds a crash count is kept after its last crash,
-- ARGV[4] our worker ids' prefix,
-- ARGV[5] ms the head of a queue short of notifications must stand still before they are topped up,
-- ARGV[6] record key prefix
-- Returns {the number of notifications pushed (go-delayed's return value),
-- then per crash loop left in place: worker id, blob, crash count}.
local max_crashes = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
local our_prefix = ARGV[4]

local function crashes(task)
    local digest = redis.sha1hex(task)
    local entry = redis.call('hget', KEYS[4], digest)
    local count = (entry and tonumber(string.match(entry, '^(%d+)')) or 0) + 1
    redis.call('hset', KEYS[4], digest, count .. ':' .. now)
    return count
end

-- Unlike go-delayed, top up missing notifications only once the queue's head has stood still
-- for ARGV[5] ms: a worker between its BLPOP and its dequeue also leaves a task without a
-- notification, for a round trip, and a notification pushed for that task would wake a
-- worker with no task behind it (go-delayed's dequeue then errors and backs off 1 s, 2 s, ...).
local function missing_notifications()
    local deficit = redis.call('llen', KEYS[1]) - redis.call('llen', KEYS[2])
    if deficit <= 0 then
        redis.call('del', KEYS[6])
        return 0
    end
    local clock = redis.call('time')
    local now_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
    local head = redis.sha1hex(redis.call('lindex', KEYS[1], 0))
    local seen, since = string.match(redis.call('get', KEYS[6]) or '', '^(%x+):(%d+)$')
    if seen ~= head then
        since = now_ms
        redis.call('set', KEYS[6], head .. ':' .. now_ms)
    end
    if now_ms - tonumber(since) < tonumber(ARGV[5]) then
        return 0
    end
    redis.call('del', KEYS[6])
    return deficit
end

local count = missing_notifications()
local track = redis.call('exists', KEYS[7]) == 1 and tracking(ARGV[6])
local crash_loops = {}
for i = 8, #KEYS do
    local worker_id = KEYS[i]
    local task = redis.call('hget', KEYS[3], worker_id)
    if task and not redis.call('get', worker_id) then
        local ours = string.sub(worker_id, 1, #our_prefix) == our_prefix
        local crashed = (max_crashes > 0 and ours) and crashes(task) or 0
        if crashed > max_crashes then
            crash_loops[#crash_loops + 1] = worker_id
            crash_loops[#crash_loops + 1] = task
            crash_loops[#crash_loops + 1] = crashed
        else
            redis.call('hdel', KEYS[3], worker_id)
            count = count + 1
            redis.call('rpush', KEYS[1], task)
            local key = track and track.key(task)
            if key then
                track.pending(key, task, false)
            end
        end
    end
end

redis.call('zremrangebyscore', KEYS[5], '-inf', now)

if max_crashes > 0 then
    local counts = redis.call('hgetall', KEYS[4])
    for i = 1, #counts, 2 do
        if now - tonumber(string.match(counts[i + 1], ':(%d+)$')) > tonumber(ARGV[3]) then
            redis.call('hdel', KEYS[4], counts[i])
        end
    end
end

-- Push in chunks: Lua's unpack() fails past a few thousand values.
local left = count
while left > 0 do
    local chunk = {}
    for i = 1, math.min(left, 1000) do
        chunk[i] = '1'
    end
    redis.call('lpush', KEYS[2], unpack(chunk))
    left = left - #chunk
end
table.insert(crash_loops, 1, count)
return crash_loops
