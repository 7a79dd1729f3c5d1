"""keakon/delayed 1.x's import path of Queue: its Queue, with keakon's worker and sweeper calls
(delayed.protocol.keakon), and AsyncQueue."""
from .protocol.keakon import KeakonQueue as Queue
from .protocol.queue import AsyncQueue

__all__ = ["AsyncQueue", "Queue"]
