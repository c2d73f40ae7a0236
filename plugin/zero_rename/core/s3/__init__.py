"""The S3 store: client settings and requests (``client``), conditional writes that
survive a lost answer (``writes``), listings (``listing``), completes on the
light path and in worker processes (``signing``, ``http``, ``completers``,
``fanout``), request statistics (``stats``), what a store does (``probes``,
``races``, ``profiles``) and URLs fit for messages (``redact``).

It knows S3 and nothing of the protocol: no module here imports
``zero_rename.core.data`` or ``zero_rename.core.protocol``.
"""
