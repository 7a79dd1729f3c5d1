-- The tasks workers hold, for people to look at: at most limit fields of the processing hash (read
-- with HSCAN), each task cut to its first bytes, with its full length, so that a reader never
-- downloads a large task. Whether each worker is alive is asked outside: a go-delayed worker's
-- keep-alive key may live in another slot.
-- KEYS: processing
-- ARGV: limit head
-- limit: most fields; head: most bytes of each task returned
-- Returns {worker id, length, head, worker id, length, head, ...}.
local limit, head = tonumber(ARGV[1]), tonumber(ARGV[2])
local held, cursor = {}, '0'
repeat
    local reply = redis.call('hscan', KEYS[1], cursor, 'count', 100)
    cursor = reply[1]
    local fields = reply[2]
    for i = 1, #fields, 2 do
        if #held >= 3 * limit then
            return held
        end
        local task = fields[i + 1]
        held[#held + 1], held[#held + 2], held[#held + 3] = fields[i], #task, string.sub(task, 1, head)
    end
until cursor == '0'
return held
