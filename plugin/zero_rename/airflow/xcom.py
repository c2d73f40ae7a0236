"""A step's summary as XCom: plain JSON, under the core's one summary key."""

from __future__ import annotations

from typing import Any

from zero_rename.core import SUMMARY_KEY, JobSummary

__all__ = ["SUMMARY_KEY", "xcom_summary"]


def xcom_summary(summary: JobSummary, step: str) -> dict[str, Any]:
    """A step's summary as plain JSON for XCom: counts and timings, never a credential."""
    return {"step": step, **summary.model_dump(mode="json")}
