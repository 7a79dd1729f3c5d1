-- Put tasks of our dead workers back at the tail of the queue, with their notifications, each as
-- the caller rewrote it (its crash count one higher: see delayed/task.py's `crashes` option),
-- releasing them, atomically; each only if its worker's keep-alive key is still gone and its id
-- still holds the blob the sweep read (another sweeper may have moved it since).
-- KEYS[1] queue list, KEYS[2] notification list, KEYS[3] processing hash, KEYS[4] the queue's tracked
-- marker, KEYS[5 ..] the worker ids (each a field of the processing hash and a keep-alive key)
-- ARGV[1] record key prefix, then per worker id, in KEYS' order: the blob it held, the blob to enqueue
-- Returns how many tasks it requeued.
local track = redis.call('exists', KEYS[4]) == 1 and tracking(ARGV[1])
local count = 0
for i = 5, #KEYS do
    local held, blob = ARGV[2 * (i - 5) + 2], ARGV[2 * (i - 5) + 3]
    if redis.call('hget', KEYS[3], KEYS[i]) == held and not redis.call('get', KEYS[i]) then
        redis.call('hdel', KEYS[3], KEYS[i])  -- first: a write that frees memory (see claim_batch.lua)
        redis.call('rpush', KEYS[1], blob)
        redis.call('rpush', KEYS[2], '1')
        count = count + 1
        local key = track and track.key(blob)
        if key then
            track.pending(key, blob, false)
        end
    end
end
return count
