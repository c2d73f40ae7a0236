"""The protocol's steps, and the job state machine that orders them.

The state machine (``states``) and the job records it moves (``jobs``: setup,
reads, compare-and-swap); a task attempt and its files (``task``, ``writers``,
``fence``); validation, conflicts and claims (``validate``, ``conflicts``,
``claims``); the commit plan, job commit and publishing (``planning``,
``commit``, ``publish``); abort, cleanup and rollback (``abort``,
``rollback``); whose a pending upload is (``pending``); the committed state
readers read (``snapshot``) and the check of committed output (``output_check``).
"""
