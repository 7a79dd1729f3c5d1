-- A worker's keep-alive keys: with action "claim" (going online), set each of its ids' keys unless
-- one is taken; with "refresh", set them whatever they hold; and list the worker in the queue's
-- workers set. Its description (info, a hash) is written as it goes online and lives and lapses with
-- its keys: a refresh extends it, keeping what it holds, and writes it again only if it is gone.
-- The first write frees memory (our lapsed workers leave the set), so that a Redis at its
-- maxmemory (noeviction) still lets a worker go online and refresh its keys, and so drain the
-- queue that would free it: Redis refuses a script's first write that would grow memory, not the
-- later ones (see claim_batch.lua).
-- KEYS: workers info ids...
-- ARGV: ttl_ms now lapse_at action about...
-- info: the worker's description key (named after its main id); ids: the worker's ids (its main id
-- first); ttl_ms: how long the keys live; now, lapse_at: unix seconds; action: "claim" or
-- "refresh"; about: the description's fields and values (see delayed/wire/worker_info.py), none for none
-- Returns 1, or 0 when an id was taken (then nothing is set).
redis.call('zremrangebyscore', KEYS[1], '-inf', ARGV[2])
local claiming = ARGV[4] == 'claim'
if claiming then
    for i = 3, #KEYS do
        if redis.call('exists', KEYS[i]) == 1 then
            return 0
        end
    end
end
for i = 3, #KEYS do
    redis.call('set', KEYS[i], '1', 'px', ARGV[1])
end
if #ARGV > 4 and (claiming or redis.call('pexpire', KEYS[2], ARGV[1]) == 0) then
    redis.call('del', KEYS[2])
    redis.call('hset', KEYS[2], unpack(ARGV, 5))
    redis.call('pexpire', KEYS[2], ARGV[1])
end
redis.call('zadd', KEYS[1], ARGV[3], KEYS[3])
return 1
