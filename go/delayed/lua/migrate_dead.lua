-- Move the head of an old dead-letter list (versions before the stream) into the stream, as letters
-- the client converted: fenced on the entries it read, so two operators migrating at once move each once.
-- KEYS: dead dead_letters
-- ARGV: count hashes... letters...
-- count: n, the entries read from the head; hashes: their sha1 (hex); letters: per entry a field
-- count k and k field, value pairs
-- Returns 1, or 0 (nothing changed) when the head is no longer what the client read.
local n = tonumber(ARGV[1])
local head = redis.call('lrange', KEYS[1], 0, n - 1)
if #head ~= n then return 0 end
for i = 1, n do
    if redis.sha1hex(head[i]) ~= ARGV[i + 1] then return 0 end
end
redis.call('ltrim', KEYS[1], n, -1)
local at = n + 2
for _ = 1, n do
    local k = tonumber(ARGV[at])
    local add = {'xadd', KEYS[2], '*'}
    for j = 1, 2 * k do add[#add + 1] = ARGV[at + j] end
    redis.call(unpack(add))
    at = at + 2 * k + 1
end
return 1
