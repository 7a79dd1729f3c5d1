-- Dead letters for people to look at: each letter's fields cut to their first bytes, with their full
-- lengths, so that a reader never downloads a large task (a too_large letter holds the whole blob);
-- with a filter, only the letters it takes, looking at no more than scan letters.
-- KEYS: dead_letters
-- ARGV: start end count head scan filter
-- start: '-', '(' .. id, or an id; end: '+' or an id; count: most letters returned (0: all); head: most
-- bytes of each field returned; scan: with a filter, most letters looked at (0: no bound); filter: which
-- letters (see dead_filter.lua; '': all)
-- uses: dead_filter
-- Returns {the id of the last letter looked at ('' if none), how many it looked at, then per letter:
-- {id, {field, head, field, head, ...}, {field, length, field, length, ...}}}.
local count, limit, scan = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local matches = dead_filter(ARGV[6])
local reply, start = {'', 0}, ARGV[1]

local function add(entry)
    local heads, lengths = {}, {}
    for j = 1, #entry[2], 2 do
        local field, value = entry[2][j], entry[2][j + 1]
        heads[j], heads[j + 1] = field, string.sub(value, 1, limit)
        lengths[j], lengths[j + 1] = field, #value
    end
    reply[#reply + 1] = {entry[1], heads, lengths}
end

if not matches then
    local entries = count > 0 and redis.call('xrange', KEYS[1], start, ARGV[2], 'count', count)
        or redis.call('xrange', KEYS[1], start, ARGV[2])
    for _, entry in ipairs(entries) do
        add(entry)
        reply[1], reply[2] = entry[1], reply[2] + 1
    end
    return reply
end
while (count == 0 or #reply - 2 < count) and (scan == 0 or reply[2] < scan) do
    local batch = scan == 0 and 100 or math.min(100, scan - reply[2])
    local entries = redis.call('xrange', KEYS[1], start, ARGV[2], 'count', batch)
    for _, entry in ipairs(entries) do
        reply[1], reply[2] = entry[1], reply[2] + 1
        if matches(entry[2]) then
            add(entry)
            if #reply - 2 == count then
                return reply
            end
        end
    end
    if #entries < batch then
        break
    end
    start = '(' .. reply[1]
end
return reply
