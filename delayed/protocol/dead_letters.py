"""A queue's dead letters (<name>_dead_letters, a stream): where a worker or sweeper writes one
(bury), and the operators' side: list, show, count, requeue, delete, purge. Each operator's call
first moves an old <name>_dead list (versions before the stream) into the stream."""
import hashlib
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, cast

from ..errors import DeadLetterError
from ..wire import dead_letter
from ..wire.keys import QueueKeys
from ..wire.tracking import Tracked
from .scripts import Script

DEFAULT_DEAD_MAX = 10_000
"""Dead letters kept: writing one trims the oldest past this many (0: no bound)."""
DEFAULT_DEAD_MAX_AGE = 7 * 24 * 3600
"""Seconds a dead letter is kept: writing one trims those older (0: no bound)."""
REQUEUE_CHUNK_LETTERS = 500
REQUEUE_CHUNK_BYTES = 512 * 1024
"""The most letters, and task bytes, one call of `requeue_all` moves: a few ms of Redis's time."""
MIGRATE_CHUNK = 32
"""Entries of an old dead-letter list moved into the stream per round trip."""

BURY = Script("bury")
PEEK_DEAD = Script("peek_dead")
REQUEUE_DEAD = Script("requeue_dead")
REQUEUE_DEAD_CHUNK = Script("requeue_dead_chunk")
DELETE_DEAD = Script("delete_dead")
MIGRATE_DEAD = Script("migrate_dead")


class DeadLetters:
    """The dead letters of one queue, on conn (a client that sends each command once).

    dead_max, dead_max_age: the retention, applied as a letter is written: the oldest past dead_max
    letters, and those older than dead_max_age seconds, are trimmed (whole stream nodes at a time,
    so a few more may stay); 0 turns a bound off.
    """

    def __init__(self, conn: Any, keys: QueueKeys, dead_max: int = DEFAULT_DEAD_MAX,
                 dead_max_age: float = DEFAULT_DEAD_MAX_AGE) -> None:
        self.conn = conn
        self.keys = keys
        self.dead_max = dead_max
        self.dead_max_age = dead_max_age
        self._bury = BURY.bind(conn, keys)
        self._peek = PEEK_DEAD.bind(conn, keys)
        self._requeue = REQUEUE_DEAD.bind(conn, keys)
        self._requeue_chunk = REQUEUE_DEAD_CHUNK.bind(conn, keys)
        self._delete = DELETE_DEAD.bind(conn, keys)
        self._migrate = MIGRATE_DEAD.bind(conn, keys)

    def bury(self, worker_id: str, claimed: bytes, letter: dead_letter.Letter,
             tracked: Optional[Tracked] = None) -> bool:
        """Add a dead letter (see delayed.wire.dead_letter.record) and release the task worker_id
        holds, atomically, trimming the letters to dead_max and dead_max_age. Fenced: False, and
        nothing done, if the worker no longer holds `claimed`. A tracked task's record ends as
        tracked's status (failed or dead), with its error and the letter's id."""
        return bool(self._bury(
            record=() if tracked is None else (self.keys.task(tracked.task_id),),
            worker_id=worker_id, claimed=claimed, dead_max=self.dead_max,
            dead_max_age_ms=int(self.dead_max_age * 1000), status=tracked.status if tracked else "",
            error=tracked.error if tracked else "", letter=[item for pair in letter.items() for item in pair]))

    def list(self, after: Optional[str] = None, count: Optional[int] = None,
             migrate: bool = True, head: Optional[int] = None) -> List[Dict[str, Any]]:
        """Dead letters, oldest first, parsed (delayed.wire.dead_letter.parse): up to count of them
        (default: all), starting after the letter id `after`. migrate=False reads without moving an
        old list into the stream first (for readers that must not write): its letters are not shown.
        head: read at most this many bytes of each letter's task and record (for previews: a
        too_large letter holds its whole blob); "task_bytes" says how long the task is."""
        if migrate:
            self.migrate()
        if after is not None:
            dead_letter.check_ids([after])
            if after == dead_letter.LAST_ID:
                return []
        return self._read("-" if after is None else "(" + after, "+", count, head)

    def show(self, letter_id: str, migrate: bool = True, head: Optional[int] = None) -> Dict[str, Any]:
        """One dead letter, parsed; DeadLetterError if there is none with this id (migrate and head:
        as list)."""
        dead_letter.check_ids([letter_id])
        if migrate:
            self.migrate()
        entries = self._read(letter_id, letter_id, 1, head)
        if not entries:
            raise DeadLetterError(f"no dead letter {letter_id} in {self.keys.dead_letters}")
        return entries[0]

    def _read(self, start: str, end: str, count: Optional[int], head: Optional[int]) -> List[Dict[str, Any]]:
        """The letters from start to end (XRANGE's bounds), whole, or each field cut to head bytes."""
        if head is None:
            entries = cast(List[Tuple[bytes, Dict[bytes, bytes]]],
                           self.conn.xrange(self.keys.dead_letters, start, end, count))
            return [dead_letter.parse(letter_id, fields) for letter_id, fields in entries]
        reply = self._peek(start=start, end=end, count=count or 0, head=head)
        return [dead_letter.parse(letter_id, _pairs(heads), _pairs(lengths)) for letter_id, heads, lengths in reply]

    def count(self) -> int:
        """How many dead letters there are (those still in an old list included)."""
        with self.conn.pipeline(transaction=False) as pipe:
            pipe.xlen(self.keys.dead_letters)
            pipe.llen(self.keys.dead)
            return sum(pipe.execute())

    def requeue(self, letter_ids: Sequence[str]) -> int:
        """Move the tasks of these letters back into the queue, each with its notification, in one
        script; if any id names no letter (or one without a task), DeadLetterError and nothing moves."""
        dead_letter.check_ids(letter_ids)
        self.migrate()
        reply = self._requeue(task_field=dead_letter.TASK, letter_ids=letter_ids)
        self._check(reply[1:])
        return int(reply[0])

    def requeue_all(self, progress: Optional[Callable[[int, int], None]] = None) -> int:
        """Move every dead letter's task back into the queue, with its notification, in chunks (each
        one script of a few ms: Redis stays responsive, and nothing is held here); letters without a
        task stay. progress(moved so far, letters at the start) after each chunk. Returns how many moved."""
        self.migrate()
        total = int(self.conn.xlen(self.keys.dead_letters))
        moved, cursor = 0, "-"
        while True:
            chunk, skipped, last = self._requeue_chunk(task_field=dead_letter.TASK, after=cursor,
                                                       most_letters=REQUEUE_CHUNK_LETTERS,
                                                       most_bytes=REQUEUE_CHUNK_BYTES)
            if not chunk and not skipped:
                return moved
            moved += int(chunk)
            cursor = last.decode()
            if progress is not None:
                progress(moved, total)

    def delete(self, letter_ids: Sequence[str]) -> int:
        """Delete these dead letters; if any id names no letter, DeadLetterError and nothing is deleted."""
        dead_letter.check_ids(letter_ids)
        self.migrate()
        reply = self._delete(letter_ids=letter_ids)
        self._check([item for letter_id in reply[1:] for item in (letter_id, b"no such dead letter")])
        return int(reply[0])

    def purge(self) -> int:
        """Delete every dead letter (an old list's too; freed in the background); returns how many there were."""
        with self.conn.pipeline(transaction=True) as pipe:
            pipe.xlen(self.keys.dead_letters)
            pipe.llen(self.keys.dead)
            pipe.unlink(self.keys.dead_letters, self.keys.dead)
            letters, old, _ = pipe.execute()
        return int(letters) + int(old)

    def migrate(self) -> int:
        """Move an old <name>_dead list (versions before the stream; an old worker may still write
        one) into the dead-letter stream, a few entries per script, each fenced on what was read;
        returns how many moved. Nothing is trimmed: the next letter a worker writes applies the bound."""
        moved = 0
        while True:
            head = cast(List[bytes], self.conn.lrange(self.keys.dead, 0, MIGRATE_CHUNK - 1))
            if not head:
                return moved
            letters: List[Any] = []
            for entry in head:
                letter = dead_letter.from_legacy(entry)
                letters += [len(letter), *(item for pair in letter.items() for item in pair)]
            if self._migrate(count=len(head), hashes=[hashlib.sha1(entry).hexdigest() for entry in head],
                             letters=letters):
                moved += len(head)

    def _check(self, problems: Sequence[bytes]) -> None:
        """Raise DeadLetterError for a script's (id, problem) pairs, if any."""
        if problems:
            named = "; ".join(f"{problems[i].decode()}: {problems[i + 1].decode()}" for i in range(0, len(problems), 2))
            raise DeadLetterError(f"{self.keys.dead_letters}: {named} (nothing was changed)")


def _pairs(flat: Sequence[Any]) -> Dict[Any, Any]:
    """A script's flat [field, value, field, value, ...] reply as a dict."""
    return dict(zip(flat[::2], flat[1::2]))
