"""A store behind TLS, as R2, GCS and most MinIO and Ceph deployments are: the light
client, its completes and the streamed upload listing verify the store's
certificate against the CA bundle botocore would (``AWS_CA_BUNDLE``), and a
certificate nothing vouches for fails the request rather than being trusted."""

from __future__ import annotations

import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.whole_job import assert_committed_once, run_job
from zero_rename.core.committer import Committer
from zero_rename.core.s3.client import S3Store, StoreConfig
from zero_rename.core.s3.light import LightClient
from zero_rename.embedded_s3 import EmbeddedS3
from zero_rename.errors import StoreError

pytestmark = pytest.mark.s3


class TlsFront:
    """TLS on a port of its own, each connection carried to the store in the clear."""

    def __init__(self, target: str, cert: Path, key: Path) -> None:
        parts = urlsplit(target)
        self.target = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint_url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._carry, args=(client,), daemon=True).start()

    def _carry(self, client: socket.socket) -> None:
        try:
            secure = self.context.wrap_socket(client, server_side=True)
        except (OSError, ssl.SSLError):  # a client that refused the certificate
            client.close()
            return
        store = socket.create_connection(self.target)
        threading.Thread(target=_pump, args=(store, secure), daemon=True).start()
        _pump(secure, store)

    def close(self) -> None:
        self.listener.close()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for end in (source, sink):
            end.close()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    where = tmp_path_factory.mktemp("tls")
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
            "-keyout", str(key), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


@pytest.fixture
def front(s3_server: EmbeddedS3, certificate: tuple[Path, Path]) -> Iterator[TlsFront]:
    running = TlsFront(s3_server.endpoint_url, *certificate)
    yield running
    running.close()


def test_a_store_behind_tls_is_verified_against_the_ca_bundle(
    front: TlsFront,
    bucket: str,
    certificate: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_CA_BUNDLE", str(certificate[0]))
    store = S3Store.connect(StoreConfig(endpoint_url=front.endpoint_url))
    assert isinstance(store.client, LightClient)
    store.put_object(bucket, "tls/a.json", b"{}", if_none_match=True)
    head = store.head_object(bucket, "tls/a.json")
    assert head is not None and store.get_object(bucket, "tls/a.json") == (b"{}", head.etag)
    # The rest of a listing paged by upload id alone comes in one streamed answer,
    # over a connection of the listing's own.
    keys = sorted(f"tls/up/k{i}" for i in range(4))
    uploads = {key: store.create_upload(bucket, key) for key in keys}
    listed = sorted(u.key for u in store.list_uploads(bucket, "tls/up/", page_size=2))
    assert listed == keys
    for key, upload_id in uploads.items():
        store.abort_upload(bucket, key, upload_id)
    assert list(store.list_uploads(bucket, "tls/up/")) == []
    # A whole job through it: job setup, the tasks' uploads, the completes, _SUCCESS.
    committer = Committer(f"s3://{bucket}/table", StoreConfig(endpoint_url=front.endpoint_url))
    assert_committed_once(committer, run_job(committer))


def test_a_certificate_nothing_vouches_for_fails_the_request(
    front: TlsFront,
    bucket: str,
    s3_server: EmbeddedS3,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Verified against certifi's bundle (no AWS_CA_BUNDLE), the store's
    self-signed certificate is refused: nothing is sent over that connection."""
    monkeypatch.delenv("AWS_CA_BUNDLE", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    store = S3Store.connect(StoreConfig(endpoint_url=front.endpoint_url, max_attempts=1))
    assert isinstance(store.client, LightClient)
    with pytest.raises(StoreError, match="CERTIFICATE_VERIFY_FAILED") as refused:
        store.put_object(bucket, "tls/b.json", b"{}")
    assert "\n" not in str(refused.value)
    direct = S3Store.connect(StoreConfig(endpoint_url=s3_server.endpoint_url))
    assert direct.head_object(bucket, "tls/b.json") is None
