"""Listing and renaming objects with a plain boto3 client: what the benchmarks'
baselines do, and how every method's output is checked afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from zero_rename.core.data.layout import is_visible
from zero_rename.core.data.model import PendingUpload


def objects_under(client: Any, bucket: str, prefix: str) -> Iterator[dict[str, Any]]:
    """Every object under ``prefix``, as ListObjectsV2 describes it (1,000 a page)."""
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    for page in pages:
        yield from page.get("Contents", [])


def visible_files(client: Any, bucket: str, prefix: str) -> int:
    """Files a table reader sees under ``prefix`` (hidden and ``_`` names excluded)."""
    return sum(
        1 for obj in objects_under(client, bucket, prefix) if is_visible(obj["Key"][len(prefix) :])
    )


def object_count(client: Any, bucket: str, prefix: str) -> int:
    return sum(1 for _ in objects_under(client, bucket, prefix))


def rename_prefix(
    client: Any, bucket: str, source: str, target: str, threads: int, delete: bool = True
) -> list[str]:
    """What a rename-based commit does on S3, which has no rename: list ``source``,
    copy each object to the same name under ``target`` (CopyObject) and, with
    ``delete``, delete it (one DeleteObject a file). Returns the source keys."""
    keys = [obj["Key"] for obj in objects_under(client, bucket, source)]

    def rename(key: str) -> None:
        client.copy_object(
            Bucket=bucket,
            Key=target + key[len(source) :],
            CopySource={"Bucket": bucket, "Key": key},
        )
        if delete:
            client.delete_object(Bucket=bucket, Key=key)

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(rename, keys))
    return keys


def complete_upload(client: Any, bucket: str, upload: PendingUpload) -> None:
    """CompleteMultipartUpload of one recorded upload and nothing else: the floor
    the benchmarks compare a job commit with."""
    client.complete_multipart_upload(
        Bucket=bucket,
        Key=upload.key,
        UploadId=upload.upload_id,
        MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in upload.part_list()]},
    )
