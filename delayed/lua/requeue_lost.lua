-- The sweeper's pass, with go-delayed's semantics: top the notification list
-- up to the length of the queue, and move every task held by a worker whose
-- keep-alive key is gone back to the tail of the queue with a notification.
-- KEYS[1] queue list, KEYS[2] notification list, KEYS[3] processing hash
-- Returns the number of notifications pushed (go-delayed's return value).
local count = redis.call('llen', KEYS[1]) - redis.call('llen', KEYS[2])
local processing = redis.call('hgetall', KEYS[3])
for i = 1, #processing, 2 do
    local worker_id = processing[i]
    if not redis.call('get', worker_id) then
        count = count + 1
        redis.call('rpush', KEYS[1], processing[i + 1])
        redis.call('hdel', KEYS[3], worker_id)
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
return count
