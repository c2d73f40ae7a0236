"""Prepare the stack's S3 server: wait for it, create the bucket, set the upload rule.

    python deploy/s3_init.py --endpoint-url URL [--bucket NAME ...] [--lifecycle-days N]

The bucket defaults to ``$ZERO_RENAME_BUCKET`` (``warehouse``). Creating a
bucket that exists is fine, so the job can run at every start. With
``--lifecycle-days`` the bucket also gets the rule that aborts multipart
uploads still pending after N days (``zero-rename lifecycle set``), the
backstop for uploads of jobs that crashed past every cleanup.

Credentials come from boto3's standard chain (``AWS_ACCESS_KEY_ID``...).
Run by the compose stack's ``s3-init`` service and by ``deploy/stack.py``.
Exit codes: 0 ready, 1 failed.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

log = logging.getLogger("s3_init")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--endpoint-url", required=True, help="the S3 endpoint, http(s)://host:port"
    )
    parser.add_argument(
        "--bucket",
        action="append",
        default=[],
        help="bucket to create (repeatable; default $ZERO_RENAME_BUCKET or warehouse)",
    )
    parser.add_argument(
        "--lifecycle-days",
        type=int,
        default=0,
        help="abort multipart uploads pending this many days (default: no rule)",
    )
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="seconds to wait for the server (default 120)"
    )
    return parser.parse_args(argv)


def wait_for_s3(endpoint_url: str, timeout: float) -> None:
    """Until the server answers HTTP: an unsigned request gets an S3 error document."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(endpoint_url.rstrip("/") + "/", timeout=2)
            return
        except urllib.error.HTTPError:
            return
        except OSError as exc:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"S3 at {endpoint_url} did not answer in {timeout:.0f}s: {exc}"
                ) from None
            time.sleep(0.5)


def create_bucket(endpoint_url: str, bucket: str, timeout: float) -> None:
    """Create the bucket; right after start the gateway may still refuse, so retry."""
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "s3",
        endpoint_url=endpoint_url,
        config=Config(
            s3={"addressing_style": "path"}, retries={"mode": "standard", "max_attempts": 3}
        ),
    )
    # Outside us-east-1, AWS wants the region named again in the request.
    region = client.meta.region_name
    where = (
        {}
        if region in (None, "us-east-1")
        else {"CreateBucketConfiguration": {"LocationConstraint": region}}
    )
    deadline = time.monotonic() + timeout
    while True:
        try:
            client.create_bucket(Bucket=bucket, **where)
            log.info("created bucket %s", bucket)
            return
        except client.exceptions.BucketAlreadyOwnedByYou:
            log.info("bucket %s exists", bucket)
            return
        except Exception as exc:
            code = getattr(exc, "response", {}).get("Error", {}).get("Code", "")
            if code == "BucketAlreadyExists":
                log.info("bucket %s exists", bucket)
                return
            if time.monotonic() > deadline:
                raise
            log.info("bucket %s not created yet (%s); retrying", bucket, code or exc)
            time.sleep(1)


def set_lifecycle(endpoint_url: str, bucket: str, days: int) -> None:
    """The project's own command, so that the rule is the one its docs describe."""
    cli = Path(sys.executable).parent / "zero-rename"
    command = [
        str(cli) if cli.exists() else "zero-rename",
        "--endpoint-url",
        endpoint_url,
        "lifecycle",
        "set",
        bucket,
        "--days",
        str(days),
    ]
    subprocess.run(command, check=True, timeout=120)


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    args = parse_args(argv)
    buckets = args.bucket or [os.environ.get("ZERO_RENAME_BUCKET") or "warehouse"]
    try:
        wait_for_s3(args.endpoint_url, args.timeout)
        for bucket in buckets:
            create_bucket(args.endpoint_url, bucket, args.timeout)
            if args.lifecycle_days > 0:
                set_lifecycle(args.endpoint_url, bucket, args.lifecycle_days)
    except Exception as exc:
        log.error("S3 at %s not prepared: %s", args.endpoint_url, exc)
        return 1
    log.info("S3 at %s ready: %s", args.endpoint_url, ", ".join(buckets))
    return 0


if __name__ == "__main__":
    sys.exit(main())
