-- Note when a worker's ids claimed the tasks they have held a while, for people (see
-- delayed/wire/worker_info.py): each id's field in the worker's description, in ms by Redis's clock,
-- now less the task's age as the worker measured it. Nothing is written if the description is gone (a
-- lapsed worker's: a hash written now would live on without an expiry).
-- KEYS: info
-- ARGV: claims...
-- claims: per id, the id and the milliseconds since it claimed its task
-- Returns 1, or 0 if there is no description.
if redis.call('exists', KEYS[1]) == 0 then
    return 0
end
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local fields = {}
for i = 1, #ARGV, 2 do
    fields[#fields + 1] = ARGV[i]
    fields[#fields + 1] = string.format('%d', now - tonumber(ARGV[i + 1]))
end
redis.call('hset', KEYS[1], unpack(fields))
return 1
