"""The job commit's journal: which of the plan's uploads are already visible.

Create-only checkpoints under ``journal/``, one per shard of the plan's uploads
and per few seconds or thousand completions, so a retry after a crash skips
what is done and checks only the rest. Sizes stay bounded: an entry names
indexes within one shard, and a finished shard is one ``done`` entry.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from zero_rename.core.data.model import CommitPlan, JournalEntry, dump, load
from zero_rename.core.data.records import JobContext
from zero_rename.core.s3.writes import create_once

# Journal a checkpoint after this many completions or seconds, whichever first.
JOURNAL_EVERY_FILES = 1000
JOURNAL_EVERY_SECONDS = 5.0


@dataclass
class Progress:
    """What the journal says is done, and the next free sequence number."""

    done: set[int] = field(default_factory=set)
    partial: dict[int, set[int]] = field(default_factory=dict)
    next_seq: int = 0

    def completed_in(self, shard: int) -> set[int]:
        return self.partial.get(shard, set())


def read_progress(ctx: JobContext, plan: CommitPlan) -> Progress:
    store, dest = ctx.store, ctx.dest
    progress = Progress()
    for obj in store.list_objects(dest.bucket, dest.job(plan.job_id).journal_dir):
        found = store.get_object(dest.bucket, obj.key)
        if found is None:
            continue
        entry = load(JournalEntry, found[0], obj.key)
        progress.next_seq = max(progress.next_seq, entry.seq + 1)
        if entry.plan_id != plan.plan_id:
            continue
        if entry.done:
            progress.done.add(entry.shard)
        else:
            progress.partial.setdefault(entry.shard, set()).update(entry.completed)
    return progress


class Journal:
    """Writes create-only checkpoints of completed uploads, shard by shard."""

    def __init__(self, ctx: JobContext, plan: CommitPlan, seq: int) -> None:
        store, dest = ctx.store, ctx.dest
        self.ctx = ctx
        self.store, self.dest, self.plan, self.seq = store, dest, plan, seq
        self.shard = 0
        self.pending: list[int] = []
        self.last = time.monotonic()
        self.written: list[str] = []  # the entries' keys, for the cleanup after the commit

    def add(self, shard: int, index: int) -> None:
        if shard != self.shard:
            self.flush()
            self.shard = shard
        self.pending.append(index)
        if (
            len(self.pending) >= JOURNAL_EVERY_FILES
            or time.monotonic() - self.last >= JOURNAL_EVERY_SECONDS
        ):
            self.flush()

    def flush(self) -> None:
        if self.pending:
            self._write(self.shard, tuple(sorted(self.pending)), done=False)
            self.pending = []

    def discard(self) -> None:
        """Forget the completions not yet written (a "done" entry follows)."""
        self.pending = []

    def shard_done(self, shard: int) -> None:
        self.pending = [] if shard == self.shard else self.pending
        self._write(shard, (), done=True)

    def _write(self, shard: int, completed: tuple[int, ...], done: bool) -> None:
        entry = JournalEntry(
            job_id=self.plan.job_id,
            plan_id=self.plan.plan_id,
            seq=self.seq,
            shard=shard,
            completed=completed,
            done=done,
        )
        while True:
            key = self.dest.job(self.plan.job_id).journal_key(self.seq)
            # A lost response is read back: the entry there is ours, or a
            # concurrent commit's, whose number this one must not take.
            if create_once(self.store, self.dest.bucket, key, dump(entry)) is None:
                self.written.append(key)
                break
            self.seq += 1
            entry = entry.model_copy(update={"seq": self.seq})
        self.seq += 1
        self.last = time.monotonic()
