"""Read-only views of a destination: no step of the protocol, nothing they write
moves a job.

The committed state readers read (``snapshot``); a destination's history and
which jobs are stuck (``history``); the partition view (``partitions``); the
check of committed output against ``_SUCCESS`` (``output_check``); whose a
pending upload is, and whether it may go (``pending``).

They read through the protocol's records and the store, and take the groups of
states they need from the state machine (``zero_rename.core.protocol.states``).
"""
