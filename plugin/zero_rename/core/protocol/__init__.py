"""The protocol's steps, and the job state machine that orders them.

The state machine (``states``) and job setup (``jobs``); a task attempt and its
files (``task``, ``writers``, ``fence``); validation, conflicts and claims
(``validate``, ``conflicts``, ``claims``); the commit plan, job commit and
publishing (``planning``, ``commit``, ``publish``, ``formats``); abort, cleanup
and rollback (``abort``, ``rollback``, ``table_uploads``). The read-only views
of a destination are a room of their own (``zero_rename.core.views``).
"""
