"""A queue's dead letters (<name>_dead_letters, a stream): where a worker or sweeper writes one
(bury), and the operators' side: list, show, count, requeue, delete, purge. Each operator's call
first moves an old <name>_dead list (versions before the stream) into the stream."""
import hashlib
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, cast

from ..errors import DeadLetterError
from ..wire import dead_letter
from ..wire.keys import QueueKeys
from ..wire.tracking import Tracked
from .scripts import Script, Scripts

DEFAULT_DEAD_MAX = 10_000
"""Dead letters kept: writing one trims the oldest past this many (0: no bound)."""
DEFAULT_DEAD_MAX_AGE = 7 * 24 * 3600
"""Seconds a dead letter is kept: writing one trims those older (0: no bound)."""
CHUNK_LETTERS = 500
CHUNK_BYTES = 512 * 1024
"""The most letters one call of a bulk operation (`requeue_all`, a filtered `purge` or `count`) looks at,
and the most bytes it reads (records a filter decodes, tasks it moves): a few ms of Redis's time."""
MIGRATE_CHUNK = 32
"""Entries of an old dead-letter list moved into the stream per round trip."""

BURY = Script("bury")
PEEK_DEAD = Script("peek_dead")
REQUEUE_DEAD = Script("requeue_dead")
BULK_DEAD = Script("bulk_dead")
DELETE_DEAD = Script("delete_dead")
MIGRATE_DEAD = Script("migrate_dead")


class DeadLetters:
    """The dead letters of one queue: reach them as `queue.dead`.

    A task becomes a dead letter when it cannot run (malformed, a GoTask, too large, not allowed, its
    arguments do not fit), when it failed or timed out with no retries left, or when workers kept
    dying holding it (a crash loop). A letter is an entry of the stream `<queue>_dead_letters`: a JSON
    record (`reason`, `error`, `traceback`, `func`, `queue`, `worker`, `failed_at`) and the task's raw
    blob, so nothing of the task is lost. Its id is its stream id (`1700000000000-0`). The
    `delayed dead` command does the same from a shell.

    Versions before the stream pushed letters onto a list, `<queue>_dead`: `list`, `show`, `requeue`,
    `requeue_all`, `delete` and a filtered `purge` first move such a list into the stream (`count` and
    `purge` take it in; `find` and a filtered `count` see only the stream).

    Args:
        conn: The queue's client (one that sends each command once).
        keys: The queue's keys.
        dead_max: Letters kept (default 10,000): writing one trims the oldest past this many (0: no
            bound).
        dead_max_age: Seconds a letter is kept (default 7 days): writing one trims those older (0: no
            bound). Both bounds trim whole stream nodes at a time, so a few more letters may stay.
    """

    def __init__(self, conn: Any, keys: QueueKeys, dead_max: int = DEFAULT_DEAD_MAX,
                 dead_max_age: float = DEFAULT_DEAD_MAX_AGE) -> None:
        self.conn = conn
        self.keys = keys
        self.dead_max = dead_max
        self.dead_max_age = dead_max_age
        self._scripts = Scripts(conn, keys)

    def bury(self, worker_id: str, claimed: bytes, letter: dead_letter.Letter,
             tracked: Optional[Tracked] = None) -> bool:
        """Write a dead letter and release the task the worker holds, atomically: how a worker or sweeper writes one.

        Writing trims the letters to `dead_max` and `dead_max_age`. Fenced: nothing is done if the worker
        no longer holds `claimed` (a sweeper took it).

        Args:
            worker_id: The id holding the task.
            claimed: The blob the worker holds.
            letter: The letter's fields (see `delayed.wire.dead_letter.record`).
            tracked: For a tracked task, what its record gets: it ends as `tracked.status` (failed or
                dead), with its error and the letter's id.

        Returns:
            True; False if the worker no longer held the task.
        """
        return bool(self._scripts[BURY](
            record=() if tracked is None else (self.keys.task(tracked.task_id),),
            worker_id=worker_id, claimed=claimed, dead_max=self.dead_max,
            dead_max_age_ms=int(self.dead_max_age * 1000), status=tracked.status if tracked else "",
            error=tracked.error if tracked else "", letter=[item for pair in letter.items() for item in pair]))

    def list(self, after: Optional[str] = None, count: Optional[int] = None,
             migrate: bool = True, head: Optional[int] = None) -> List[Dict[str, Any]]:
        """The dead letters, oldest first.

        Args:
            after: Start after this letter's id (to page through them).
            count: The most letters to return; default: all.
            migrate: False reads without first moving an old list into the stream (for readers that must
                not write): that list's letters are not shown.
            head: Read at most this many bytes of each letter's task and record, for previews (a
                `too_large` letter holds its whole blob); `task_bytes` says how long the task is.

        Returns:
            Each letter as a dict: `id`, its record's fields (`reason`, `error`, `traceback`, `func`,
                `queue`, `worker`, `failed_at`), `task` (the blob, or its head; None if it has none) and
                `task_bytes`. A record that is not a JSON object reads as reason `undecodable`.

        Raises:
            DeadLetterError: `after` is not a letter id.
        """
        if migrate:
            self.migrate()
        if after is not None:
            dead_letter.check_ids([after])
            if after == dead_letter.LAST_ID:
                return []
        return self._read("-" if after is None else "(" + after, "+", count, head)

    def show(self, letter_id: str, migrate: bool = True, head: Optional[int] = None) -> Dict[str, Any]:
        """One dead letter.

        Args:
            letter_id: The letter's id.
            migrate: As for `list`.
            head: As for `list`.

        Returns:
            The letter, as `list` gives each.

        Raises:
            DeadLetterError: There is no letter with this id.
        """
        dead_letter.check_ids([letter_id])
        if migrate:
            self.migrate()
        entries = self._read(letter_id, letter_id, 1, head)
        if not entries:
            raise DeadLetterError(f"no dead letter {letter_id} in {self.keys.dead_letters}")
        return entries[0]

    def find(self, head: int, after: Optional[str] = None, count: int = 20, reason: str = "", func: str = "",
             scan: int = 1000) -> Tuple[List[Dict[str, Any]], Optional[str]]:
        """The dead letters whose record says this reason and func (an empty one: any), oldest first, a
        page at a time; it never moves an old list into the stream.

        Args:
            head: As for `list`: a page reads at most this many bytes of each field of a letter it returns.
            after: Start after this letter's id.
            count: The most letters to return.
            reason: The letters' reason (see `delayed.wire.dead_letter.REASONS`; `undecodable` for a
                record that is not a JSON object).
            func: The letters' function path.
            scan: The most letters to look at, so that a page of a rare kind costs a bounded time.

        Returns:
            The letters, as `list` gives them, and the id to look on after for the next page (None at
                the end of the stream).

        Raises:
            DeadLetterError: `after` is not a letter id.
        """
        if after is not None:
            dead_letter.check_ids([after])
            if after == dead_letter.LAST_ID:
                return [], None
        last, looked, *letters = self._scripts[PEEK_DEAD](start="-" if after is None else "(" + after, end="+", count=count, head=head,
                                            scan=scan, filter=dead_letter.letter_filter(reason, func))
        found = [dead_letter.parse(letter_id, _pairs(heads), _pairs(lengths)) for letter_id, heads, lengths in letters]
        return found, (last.decode() if len(found) == count or int(looked) == scan else None)

    def _read(self, start: str, end: str, count: Optional[int], head: Optional[int]) -> List[Dict[str, Any]]:
        """The letters from start to end (XRANGE's bounds), whole, or each field cut to head bytes."""
        if head is None:
            entries = cast(List[Tuple[bytes, Dict[bytes, bytes]]],
                           self.conn.xrange(self.keys.dead_letters, start, end, count))
            return [dead_letter.parse(letter_id, fields) for letter_id, fields in entries]
        _, _, *letters = self._scripts[PEEK_DEAD](start=start, end=end, count=count or 0, head=head, scan=0, filter="")
        return [dead_letter.parse(letter_id, _pairs(heads), _pairs(lengths)) for letter_id, heads, lengths in letters]

    def count(self, reason: str = "", func: str = "", through: Optional[str] = None) -> int:
        """How many dead letters there are, those still in an old list included; or, with a filter or
        `through`, how many letters of the stream up to `through` it takes, counted in chunks.

        Args:
            reason: As for `find`: count only the letters with this reason.
            func: As for `find`: count only the letters of this function.
            through: The last letter to count (default: the newest).
        """
        if not reason and not func and through is None:
            with self.conn.pipeline(transaction=False) as pipe:
                pipe.xlen(self.keys.dead_letters)
                pipe.llen(self.keys.dead)
                return sum(pipe.execute())
        return self._bulk("count", reason, func, through)

    def newest(self) -> Optional[str]:
        """The id of the newest letter (None if there is none): where a bulk operation stops by default."""
        entries = cast(List[Tuple[bytes, Any]], self.conn.xrevrange(self.keys.dead_letters, "+", "-", 1))
        return entries[0][0].decode() if entries else None

    def requeue(self, letter_ids: Sequence[str]) -> int:
        """Move the tasks of these letters back into the queue, each with its notification, in one script.

        The letters go. All or nothing: if any id names no letter, or a letter without a task, nothing
        moves. A tracked task's record, if it has not expired, says `failed` or `dead` until a worker
        claims the task again; then the task runs tracked again.

        Args:
            letter_ids: The letters' ids.

        Returns:
            How many tasks moved.

        Raises:
            DeadLetterError: An id names no letter (or one without a task, or is not an id); nothing moved.
        """
        dead_letter.check_ids(letter_ids)
        self.migrate()
        reply = self._scripts[REQUEUE_DEAD](task_field=dead_letter.TASK, letter_ids=letter_ids)
        self._check(reply[1:])
        return int(reply[0])

    def requeue_all(self, progress: Optional[Callable[[int, int], None]] = None, reason: str = "", func: str = "",
                    through: Optional[str] = None) -> int:
        """Move the tasks of every dead letter, or of those a filter takes, back into the queue, each with
        its notification, in chunks.

        Each chunk is one script of a few milliseconds, so Redis stays responsive, and nothing is held
        here. It goes up to the letter that was the newest as it started (or `through`): letters written
        meanwhile stay, so a task that fails again at once is not requeued again. Letters without a task
        stay.

        Args:
            progress: Called after each chunk with (letters gone through so far, letters at the start).
            reason: As for `find`: only the letters with this reason.
            func: As for `find`: only the letters of this function.
            through: The last letter to requeue (default: the newest as it starts).

        Returns:
            How many tasks moved.

        Raises:
            DeadLetterError: `through` is not a letter id.
        """
        self.migrate()
        return self._bulk("requeue", reason, func, through, progress)

    def _bulk(self, action: str, reason: str, func: str, through: Optional[str],
              progress: Optional[Callable[[int, int], None]] = None) -> int:
        """Requeue, delete or count, chunk by chunk (bulk_dead.lua), the letters up to through (default: the
        newest now) that the filter takes; how many it did."""
        if through is None:
            through = self.newest()
            if through is None:
                return 0
        dead_letter.check_ids([through])
        total = int(self.conn.xlen(self.keys.dead_letters)) if progress is not None else 0
        spec = dead_letter.letter_filter(reason, func)
        done = seen = 0
        cursor = "-"
        while True:
            chunk, looked, last = self._scripts[BULK_DEAD](action=action, task_field=dead_letter.TASK, after=cursor,
                                                   through=through, filter=spec, most_letters=CHUNK_LETTERS,
                                                   most_bytes=CHUNK_BYTES)
            if not looked:
                return done
            done, seen, cursor = done + int(chunk), seen + int(looked), last.decode()
            if progress is not None:
                progress(seen, total)

    def delete(self, letter_ids: Sequence[str]) -> int:
        """Delete these dead letters; all or nothing.

        Args:
            letter_ids: The letters' ids.

        Returns:
            How many were deleted.

        Raises:
            DeadLetterError: An id names no letter (or is not an id); nothing was deleted.
        """
        dead_letter.check_ids(letter_ids)
        self.migrate()
        reply = self._scripts[DELETE_DEAD](letter_ids=letter_ids)
        self._check([item for letter_id in reply[1:] for item in (letter_id, b"no such dead letter")])
        return int(reply[0])

    def purge(self, reason: str = "", func: str = "", through: Optional[str] = None) -> int:
        """Delete every dead letter, an old list's too, at once (Redis frees them in the background); or,
        with a filter or `through`, the letters up to `through` that the filter takes, in chunks.

        Args:
            reason: As for `find`: only the letters with this reason.
            func: As for `find`: only the letters of this function.
            through: The last letter to delete (default: the newest as it starts): letters written
                meanwhile stay.

        Returns:
            How many there were (were deleted).

        Raises:
            DeadLetterError: `through` is not a letter id.
        """
        if reason or func or through is not None:
            self.migrate()
            return self._bulk("delete", reason, func, through)
        with self.conn.pipeline(transaction=True) as pipe:
            pipe.xlen(self.keys.dead_letters)
            pipe.llen(self.keys.dead)
            pipe.unlink(self.keys.dead_letters, self.keys.dead)
            letters, old, _ = pipe.execute()
        return int(letters) + int(old)

    def migrate(self) -> int:
        """Move an old `<queue>_dead` list into the dead-letter stream.

        Versions before the stream wrote that list, and an old worker may still. The entries move a few
        per script, each fenced on what was read. Nothing is trimmed: the next letter a worker writes
        applies the bounds.

        Returns:
            How many moved.
        """
        moved = 0
        while True:
            head = cast(List[bytes], self.conn.lrange(self.keys.dead, 0, MIGRATE_CHUNK - 1))
            if not head:
                return moved
            letters: List[Any] = []
            for entry in head:
                letter = dead_letter.from_legacy(entry)
                letters += [len(letter), *(item for pair in letter.items() for item in pair)]
            if self._scripts[MIGRATE_DEAD](count=len(head), hashes=[hashlib.sha1(entry).hexdigest() for entry in head],
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
