"""S3 requests signed as botocore signs them, sent over a urllib3 connection pool.

For requests whose client CPU matters (job commit's completes, see
:mod:`zero_rename.core.s3.completers`): botocore runs some twenty event handlers,
endpoint rules, a validator, a serializer and a parser per request, where a
fixed request of a few hundred bytes needs none of them. botocore still
resolves the credentials (environment, profile, instance role, refreshing
ones) and signs; only the sending is done here, one attempt per call.
Retrying, and reading the answer, is the caller's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import urllib3
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.exceptions import NoCredentialsError

from zero_rename.core.s3.client import StoreConfig, botocore_session
from zero_rename.core.s3.http import tls_options


class SignedPool:
    """Signed requests to one origin (``scheme://host[:port]``), for one region.

    Thread-safe: the pool holds up to ``config.max_pool_connections``
    connections and blocks a thread that would open one more.
    """

    def __init__(self, config: StoreConfig, origin: str, region: str) -> None:
        credentials = environment_credentials() or botocore_session().get_credentials()
        if credentials is None:
            raise NoCredentialsError()
        self.credentials = credentials
        self.origin, self.region = origin, region
        self.pool = urllib3.connection_from_url(
            origin,
            maxsize=config.max_pool_connections,
            block=True,
            retries=False,
            timeout=urllib3.Timeout(connect=config.connect_timeout, read=config.read_timeout),
            **tls_options(urlsplit(origin).scheme),
        )

    def send(
        self, method: str, path: str, body: bytes = b"", headers: Mapping[str, str] | None = None
    ) -> urllib3.BaseHTTPResponse:
        """Sign and send one request for ``path`` (quoted, query included).

        Raises botocore's ``BotoCoreError`` when there are no credentials to sign
        with (refreshing ones that could not be refreshed), and urllib3's
        ``HTTPError`` when no whole answer came: only the second is worth a retry.
        """
        request = AWSRequest(method, self.origin + path, data=body, headers=dict(headers or {}))
        # Signed afresh each attempt, as botocore does: X-Amz-Date moves on. A
        # frozen copy of the credentials per signature, as botocore's
        # RequestSigner takes: refreshing ones then refresh when due, and a
        # refresh cannot fall between reading the key and the secret.
        S3SigV4Auth(self.credentials.get_frozen_credentials(), "s3", self.region).add_auth(request)
        response: urllib3.BaseHTTPResponse = self.pool.urlopen(
            method,
            path,
            body=body,
            headers=dict(request.headers.items()),
            retries=False,
            redirect=False,
            assert_same_host=False,
        )
        return response

    def close(self) -> None:
        self.pool.close()


def environment_credentials() -> Any:
    """The credentials in the environment, if a whole set is there: the first
    source of botocore's chain (a session names no profile of its own here), read
    without a session, which costs a fresh process botocore's client machinery."""
    from botocore.credentials import EnvProvider

    return EnvProvider().load()
