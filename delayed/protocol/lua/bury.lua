-- Move a worker's task to the dead letters and release it, atomically, trimming the letters to the
-- queue's retention bound as it writes (approximately: whole stream nodes, so never more work than one node).
-- Fenced as requeue.lua is: only if the worker's id still holds the blob it claimed. A limit slot the
-- id held is freed, and a blob waiting for it goes to the head of the queue (limits.lua).
-- KEYS: dead_letters processing counts name noti limit_holders record...
-- ARGV: worker_id claimed dead_max dead_max_age_ms status error limit_running_prefix limit_waiting_prefix letter...
-- counts: adds 1 to 'dead'; record: a tracked task's record (none untracked), which ends as status
-- (failed or dead; '' untracked) says, with error (see tracking.lua); dead_max: most letters kept,
-- dead_max_age_ms: ms a letter is kept (0: no bound); letter: field, value, field, value, ...
-- A tracked task whose cancel was requested while it ran gets no letter: it ends cancelled (uncounted).
-- uses: tracking limits
-- Returns 1, or 0 when fenced off.
if redis.call('hget', KEYS[2], ARGV[1]) ~= ARGV[2] then
    return 0
end
redis.call('hdel', KEYS[2], ARGV[1])  -- first: a write that frees memory (see claim_batch.lua)
limits.freed(KEYS[6], ARGV[7], ARGV[8], KEYS[4], KEYS[5], {ARGV[1]})
local track = KEYS[7] and tracking('')
if track and track.cancelling(KEYS[7]) then
    track.ended(KEYS[7], 'cancelled')
    return 1
end
local max_letters, max_age = tonumber(ARGV[3]), tonumber(ARGV[4])
local add = {'xadd', KEYS[1]}
if max_letters > 0 then
    for _, word in ipairs({'maxlen', '~', ARGV[3]}) do add[#add + 1] = word end
end
add[#add + 1] = '*'
for i = 9, #ARGV do add[#add + 1] = ARGV[i] end
local letter = redis.call(unpack(add))
if max_age > 0 then
    local clock = redis.call('time')
    local oldest = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000) - max_age
    redis.call('xtrim', KEYS[1], 'minid', '~', string.format('%d', oldest))
end
redis.call('hincrby', KEYS[3], 'dead', 1)
if track then
    track.ended(KEYS[7], ARGV[5], 'error', ARGV[6], 'letter', letter)
end
return 1
