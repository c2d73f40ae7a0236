"""The streamed upload listing's parser, on answers built here."""

from __future__ import annotations

import tracemalloc
import xml.etree.ElementTree as ET
from collections.abc import Iterator

import pytest

from zero_rename.core.s3.listing import _Answer, _parse

pytestmark = pytest.mark.unit

NS = "http://s3.amazonaws.com/doc/2006-03-01/"


def answer(
    count: int, *, truncated: bool = False, next_key: str = "", encoding: str = ""
) -> Iterator[bytes]:
    yield (
        f'<?xml version="1.0" encoding="UTF-8"?><ListMultipartUploadsResult xmlns="{NS}">'
        f"<Bucket>b</Bucket><KeyMarker></KeyMarker><UploadIdMarker></UploadIdMarker>"
        + (f"<EncodingType>{encoding}</EncodingType>" if encoding else "")
        + f"<NextKeyMarker>{next_key}</NextKeyMarker><NextUploadIdMarker>u{count}"
        f"</NextUploadIdMarker><MaxUploads>1000</MaxUploads>"
        f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>"
    ).encode()
    for i in range(count):
        yield (
            f"<Upload><Key>t/dt%3D1/f{i}</Key><UploadId>u{i}</UploadId>"
            f"<Initiator><ID>x</ID></Initiator><StorageClass>STANDARD</StorageClass>"
            f"<Initiated>2026-11-23T01:02:03.000Z</Initiated></Upload>"
        ).encode()
    yield b"</ListMultipartUploadsResult>"


def rechunked(chunks: Iterator[bytes], size: int) -> Iterator[bytes]:
    """The same bytes cut at arbitrary places, as a socket delivers them."""
    data = b"".join(chunks)
    return (data[i : i + size] for i in range(0, len(data), size))


def test_uploads_come_one_by_one_whatever_the_chunks() -> None:
    state = _Answer()
    found = list(_parse(rechunked(answer(300), 7), state))
    assert [u[0] for u in found] == [f"t/dt%3D1/f{i}" for i in range(300)]
    assert found[0][1] == "u0" and found[0][2] is not None and found[0][2].year == 2026
    assert not state.truncated and state.next_upload_id == "u300"


def test_truncated_answers_say_where_to_continue_and_keys_are_decoded() -> None:
    state = _Answer()
    found = list(_parse(answer(3, truncated=True, next_key="t/k", encoding="url"), state))
    assert state.truncated and state.next_key == "t/k"
    assert found[0][0] == "t/dt=1/f0"


def test_memory_stays_flat_over_a_long_answer() -> None:
    tracemalloc.start()
    try:
        count = sum(1 for _ in _parse(answer(20_000), _Answer()))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 20_000
    # About 5 MB of XML; a parser that kept the uploads' elements would hold
    # some 30 MB of them by the end.
    assert peak < 1024 * 1024


def test_a_cut_or_foreign_answer_is_not_taken_for_a_complete_one() -> None:
    whole = b"".join(answer(5))
    with pytest.raises(ET.ParseError):
        list(_parse(iter([whole[: len(whole) // 2]]), _Answer()))
    with pytest.raises(Exception, match="not a ListMultipartUploadsResult"):
        list(_parse(iter([b"<Error><Code>InternalError</Code></Error>"]), _Answer()))
