"""The Lua scripts in delayed/lua/, read once at import and registered per connection."""
from importlib import resources
from typing import Any, Dict

NAMES = ("enqueue", "enqueue_unique", "enqueue_tracked", "unlock", "move_due", "dequeue", "claim_batch", "give_back",
         "requeue_lost", "requeue", "reschedule", "bury", "cancel", "tick", "requeue_dead", "requeue_dead_chunk",
         "delete_dead", "migrate_dead", "peek_dead", "notify_missing", "keep_alive")

TRACKING = ("enqueue_unique", "enqueue_tracked", "dequeue", "claim_batch", "give_back", "requeue_lost", "requeue",
            "reschedule", "bury", "cancel")
"""The scripts that write tracked tasks' records: lua/tracking.lua, the functions that do, goes before each."""


def _read(name: str) -> str:
    return resources.files(__package__).joinpath("lua", name + ".lua").read_text("utf-8")


SOURCES: Dict[str, str] = {name: (_read("tracking") if name in TRACKING else "") + _read(name) for name in NAMES}


def register(conn: Any) -> Dict[str, Any]:
    """Register every script on a redis-py client (sync or asyncio); EVALSHA with reload on NOSCRIPT."""
    return {name: conn.register_script(source) for name, source in SOURCES.items()}
