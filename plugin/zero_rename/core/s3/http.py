"""Requests the core sends beside botocore, over its own connections, the way botocore would.

Two paths send their own requests: signed ones over a pool of their own
(:mod:`zero_rename.core.s3.signing`, for the light client and the light
CompleteMultipartUpload path)
and the streamed upload listing (:mod:`zero_rename.core.s3.listing`). Both must
reach the store exactly where and how botocore does; where the configuration
says something these connections alone would not honour, they step aside and botocore
sends.
"""

from __future__ import annotations

import os
import urllib.parse
import xml.etree.ElementTree as ET


def direct_unsupported(url: str) -> str | None:
    """Why a request to ``url`` sent over the core's own connections could go
    elsewhere than botocore's, or None. A proxy counts only where botocore would
    use one for ``url``: one set for its scheme, its host not excepted by
    ``NO_PROXY`` (which alone, as many company environments set it, configures
    no proxy at all)."""
    scheme = urllib.parse.urlsplit(url).scheme
    if _environment_proxies(url).get(scheme):
        return f"an {scheme.upper()} proxy is configured for {urllib.parse.urlsplit(url).hostname}"
    if os.environ.get("AWS_CA_BUNDLE") or aws_config_file() is None:
        return None  # then no CA bundle is configured but the environment's
    import botocore.session  # the configuration's: loaded only where there is one

    if botocore.session.Session().get_config_variable("ca_bundle"):
        return "a CA bundle is set in the AWS configuration"
    return None


def _environment_proxies(url: str) -> dict[str, str]:
    """The proxies botocore takes from the environment for ``url``
    (``botocore.utils.get_environ_proxies``, whose module would cost a fresh
    process some forty of botocore's modules): urllib's reading of the proxy
    variables, none where ``NO_PROXY`` (or the system's setting) exempts the host."""
    import socket
    import urllib.request

    try:
        if urllib.request.proxy_bypass(urllib.parse.urlsplit(url).netloc):
            return {}
    except (TypeError, socket.gaierror):  # botocore's own allowance for urllib's quirks
        pass
    return urllib.request.getproxies()


def aws_config_file() -> str | None:
    """The AWS config file botocore reads (``AWS_CONFIG_FILE``, else
    ``~/.aws/config``), if there is one."""
    path = os.path.expanduser(os.environ.get("AWS_CONFIG_FILE") or "~/.aws/config")
    return path if os.path.isfile(path) else None


def ca_file(scheme: str) -> str | None:
    """The CA bundle an https request is verified against, as botocore verifies
    it: ``AWS_CA_BUNDLE``, else botocore's copy of certifi's; None for http."""
    if scheme != "https":
        return None
    from botocore.httpsession import get_cert_path

    return os.environ.get("AWS_CA_BUNDLE") or get_cert_path(True)


def parse_xml(data: bytes) -> ET.Element | None:
    """An S3 answer's XML document; None for an empty or unparsable body."""
    if not data:
        return None
    try:
        return ET.fromstring(data)
    except ET.ParseError:
        return None


def local_name(tag: str) -> str:
    """An S3 answer's element name without its namespace."""
    return tag.rpartition("}")[2]


def child_text(element: ET.Element, name: str) -> str:
    """The text of ``element``'s first child called ``name`` (any namespace), or ""."""
    for child in element:
        if local_name(child.tag) == name:
            return child.text or ""
    return ""
