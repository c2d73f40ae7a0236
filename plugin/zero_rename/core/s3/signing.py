"""S3 requests signed as botocore signs them, sent over a pool of connections of our own.

For requests whose client CPU matters (every request of the light client,
:mod:`zero_rename.core.s3.light`, and job commit's completes,
:mod:`zero_rename.core.s3.completers`): botocore runs some twenty event handlers,
endpoint rules, a validator, a serializer and a parser per request, where a
fixed request of a few hundred bytes needs none of them. The signature is
:mod:`zero_rename.core.s3.sigv4`'s; the credentials the environment's static
set, else botocore's chain's (a profile, an instance role, refreshing ones).
Only the sending is done here, one attempt per call. Retrying, and reading the
answer, is the caller's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from botocore.exceptions import NoCredentialsError

from zero_rename.core.s3.client import StoreConfig, botocore_session
from zero_rename.core.s3.http import ca_file
from zero_rename.core.s3.sigv4 import Signer, environment_credentials, signed_host
from zero_rename.core.s3.transport import ConnectionPool, Response


class SignedPool:
    """Signed requests to one origin (``scheme://host[:port]``), for one region.

    Thread-safe: the pool holds up to ``config.max_pool_connections``
    connections and blocks a thread that would open one more.
    """

    def __init__(
        self, config: StoreConfig, origin: str, region: str, credentials: Any = None
    ) -> None:
        """``credentials``: those to sign with (frozen or refreshing, as botocore's
        have them); by default boto3's standard chain's."""
        # Found now, as botocore's client finds them when it is made (an
        # incomplete set raises here); none at all fails each request instead,
        # whose error then names it, as botocore's client does.
        self._credentials = (
            credentials or environment_credentials() or botocore_session().get_credentials()
        )
        self.origin, self.region = origin, region
        self.signer = Signer(signed_host(origin), region)
        self.pool = ConnectionPool(
            origin,
            maxsize=config.max_pool_connections,
            connect_timeout=config.connect_timeout,
            read_timeout=config.read_timeout,
            ca_file=ca_file(urlsplit(origin).scheme),
        )

    @property
    def credentials(self) -> Any:
        """The credentials requests are signed with.

        Raises:
            NoCredentialsError: where the chain had none.
        """
        if self._credentials is None:
            raise NoCredentialsError()
        return self._credentials

    def send(
        self, method: str, path: str, body: bytes = b"", headers: Mapping[str, str] | None = None
    ) -> Response:
        """Sign and send one request for ``path`` (quoted, query included).

        Raises botocore's ``BotoCoreError`` when there are no credentials to sign
        with (refreshing ones that could not be refreshed), and a
        :class:`~zero_rename.core.s3.transport.TransportError` when no whole answer
        came: only the second is worth a retry.
        """
        # Signed afresh each attempt, as botocore does: X-Amz-Date moves on. A
        # frozen copy of the credentials per signature, as botocore's
        # RequestSigner takes: refreshing ones then refresh when due, and a
        # refresh cannot fall between reading the key and the secret.
        frozen = self.credentials.get_frozen_credentials()
        signed = self.signer.headers(frozen, method, path, headers or {}, body)
        return self.pool.request(method, path, body, signed)

    def close(self) -> None:
        self.pool.close()
