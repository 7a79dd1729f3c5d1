"""keakon/delayed 1.x's import path of Queue: the queue lives in delayed.protocol.queue."""
from .protocol.queue import AsyncQueue, Queue

__all__ = ["AsyncQueue", "Queue"]
