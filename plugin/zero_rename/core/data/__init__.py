"""The commit data: what the protocol writes, as typed, versioned, validated JSON.

The persistent objects (``model``), job options (``options``), where every key
lives (``layout``), bounded shards of long lists (``shards``), task and stage
manifests (``manifests``), the job commit's journal (``journal``) and
``_SUCCESS`` with the committed file list (``success``).

It reads and writes through ``zero_rename.core.s3``; of the protocol it knows
only the job's states (``zero_rename.core.protocol.states``), which its records
carry.
"""
