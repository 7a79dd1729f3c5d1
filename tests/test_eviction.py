"""Redis's maxmemory-policy, read with CONFIG GET, else INFO memory, else reported unknown: on one
server, on every primary of a Redis Cluster, on Sentinel's primary."""
import redis

from delayed.connection import connect
from delayed.eviction import EvictionPolicy, eviction_policy
from delayed.testing import RedisServer

NO_CONFIG_NOR_INFO = ["--user", "default", "on", "nopass", "~*", "&*", "+@all", "-config", "-info"]


def test_the_policy_is_read_with_config_get_else_info_else_reported_unknown(tmp_path):
    with RedisServer(tmp_path) as plain, \
            RedisServer(tmp_path, ["--maxmemory-policy", "allkeys-lru", "--rename-command", "CONFIG", ""]) as managed, \
            RedisServer(tmp_path, NO_CONFIG_NOR_INFO) as locked:
        assert eviction_policy(redis.Redis(port=plain.port)) == EvictionPolicy("noeviction")
        assert eviction_policy(redis.Redis(port=plain.port)).risk is None
        assert eviction_policy(redis.Redis(port=managed.port)) == EvictionPolicy("allkeys-lru")
        unknown = eviction_policy(redis.Redis(port=locked.port))
        assert unknown == EvictionPolicy(None) and not unknown.evicts and not unknown.evicts_any_key


def test_on_sentinel_the_primarys_policy_is_read(sentinels):
    primary, replica = redis.Redis(port=sentinels.primary.port), redis.Redis(port=sentinels.replica.port)
    try:
        primary.config_set("maxmemory-policy", "volatile-lru")
        replica.config_set("maxmemory-policy", "allkeys-lru")
        assert eviction_policy(connect(sentinels.url)) == EvictionPolicy("volatile-lru")
    finally:
        for client in (primary, replica):
            client.config_set("maxmemory-policy", "noeviction")
