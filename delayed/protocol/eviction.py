"""Which keys the server's maxmemory-policy lets Redis evict: anything but noeviction can drop queued
tasks or keep-alive keys when Redis is full, losing tasks or running them twice, without a word."""
from dataclasses import dataclass
from typing import List, Optional, Union

import redis
import redis.cluster

NOEVICTION = "noeviction"


@dataclass(frozen=True)
class EvictionPolicy:
    """A server's maxmemory-policy (None: it could not be read) and, on a cluster, the primary it is of."""

    name: Optional[str]
    node: Optional[str] = None

    @property
    def evicts(self) -> bool:
        """Whether Redis may evict some of our keys: any policy read but noeviction."""
        return self.name not in (None, NOEVICTION)

    @property
    def evicts_any_key(self) -> bool:
        """allkeys-*: queue lists, notifications and keep-alive keys alike."""
        return self.name is not None and self.name.startswith("allkeys-")

    @property
    def risk(self) -> Optional[str]:
        """One sentence on what the policy does to the queues and what to set instead; None for noeviction."""
        server = f"Redis primary {self.node}" if self.node else "Redis"
        if self.name is None:
            return (f"could not read the maxmemory-policy of {server} (CONFIG GET and INFO refused): make sure "
                    f"it is {NOEVICTION}, as an evicting Redis loses tasks")
        if self.evicts_any_key:
            return (f"{server} has maxmemory-policy {self.name}: an evicting Redis drops queued tasks and "
                    f"keep-alive keys, so tasks are lost and tasks run twice; set maxmemory-policy {NOEVICTION}")
        if self.evicts:  # volatile-*
            return (f"{server} has maxmemory-policy {self.name}: keys with a TTL can be evicted (our workers' "
                    "keep-alive keys, unique-task locks and tracked tasks' records), and a lapsed keep-alive "
                    f"makes a sweeper requeue a task that still runs; set maxmemory-policy {NOEVICTION}")
        return None

    def _rank(self) -> int:
        """How bad: anything evicted, then unknown (it may be that), then keys with a TTL, then nothing."""
        return 3 if self.evicts_any_key else 2 if self.name is None else 1 if self.evicts else 0


def eviction_policy(client: Union[redis.Redis, redis.cluster.RedisCluster]) -> EvictionPolicy:
    """The maxmemory-policy of the server client talks to: on a Redis Cluster the worst of its
    primaries' (each has its own), on Sentinel the primary's. A refused CONFIG GET (renamed away,
    no ACL permission) falls back to INFO memory; both refused give name None. Errors other than
    a refusal (a lost connection) are raised."""
    if isinstance(client, redis.cluster.RedisCluster):
        policies: List[EvictionPolicy] = [EvictionPolicy(_policy_of(node.redis_connection), node.name)
                                          for node in client.get_primaries()]
        return max(policies, key=EvictionPolicy._rank)
    return EvictionPolicy(_policy_of(client))


def _policy_of(server: redis.Redis) -> Optional[str]:
    """One server's maxmemory-policy from CONFIG GET, else from INFO memory, else None."""
    try:
        value = server.config_get("maxmemory-policy").get("maxmemory-policy")
    except redis.ResponseError:  # unknown command (a managed Redis renamed it away) or NOPERM
        value = None
    if not value:
        try:
            value = server.info("memory").get("maxmemory_policy")
        except redis.ResponseError:
            return None
    return value or None
