-- The limits in force on a queue, for people (`delayed stats`, the dashboard): per limit key of its
-- registry (limits), what its tasks' limits were when one was last admitted (JSON, see admit.lua), the
-- slots held, the blobs waiting for one, the blobs held for their rate that are not due yet (their
-- reserved starts still to come) and in how long the first of them is due, and the starts in its
-- rate's last period, by Redis's clock. One HSCAN step of the registry per call (count: its COUNT
-- hint), each key read in O(log n): a call stays bounded however many keys the queue has.
-- KEYS: limits
-- ARGV: cursor count limit_running_prefix limit_waiting_prefix limit_starts_prefix limit_reserved_prefix
-- (a limit key's keys are named after the queue, so in its Redis Cluster slot, and read undeclared:
-- they are known only from the registry)
-- Returns {the next cursor ('0' once the registry is done), then per key: key, limits, running,
-- waiting, scheduled, started, next_due_in (seconds until the first reserved start to come, '' for
-- none)}.
local clock = redis.call('time')
local now = tonumber(clock[1]) * 1000 + tonumber(clock[2]) / 1000  -- unix ms
local step = redis.call('hscan', KEYS[1], ARGV[1], 'COUNT', ARGV[2])
local reply = {step[1]}
local entries = step[2]
for i = 1, #entries, 2 do
    local key, seen = entries[i], entries[i + 1]
    local ok, limits = pcall(cjson.decode, seen)
    local period = ok and type(limits) == 'table' and tonumber(limits.period) or 0
    local starts = ARGV[5] .. key
    local started = 0
    if period > 0 then
        started = redis.call('zcount', starts, string.format('(%.3f', now - period * 1000), string.format('%.3f', now))
    end
    reply[#reply + 1] = key
    reply[#reply + 1] = seen
    reply[#reply + 1] = redis.call('scard', ARGV[3] .. key)
    reply[#reply + 1] = redis.call('llen', ARGV[4] .. key)
    reply[#reply + 1] = redis.call('zcount', ARGV[6] .. key, string.format('(%.3f', now), '+inf')
    reply[#reply + 1] = started
    local first = redis.call('zrangebyscore', starts, string.format('(%.3f', now), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    reply[#reply + 1] = first[2] and string.format('%.3f', (tonumber(first[2]) - now) / 1000) or ''
end
return reply
