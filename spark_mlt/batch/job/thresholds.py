"""What fails or warns a job after its commits: rejected rows past ``max_rejected``, and codecs
at [`CAPACITY_WARNING`][spark_mlt.batch.job.capacity.CAPACITY_WARNING] of their capacity or more.

A threshold is checked after the run's rows and quarantine are committed: a run past it is a
data-quality failure, not a crash, and its re-run finds its commits there.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping

from spark_mlt.batch.job.capacity import capacity_usage
from spark_mlt.batch.job.options import InvalidRowOptions, rejected_limit
from spark_mlt.batch.job.report import JobReport, RunLog
from spark_mlt.errors import MLTError, RejectedRowsError
from spark_mlt.storage import read_snapshot

__all__ = ["check_rejected", "warn_capacity"]

log = logging.getLogger("spark_mlt")


def check_rejected(report: JobReport, options: InvalidRowOptions) -> None:
    """Fails a run that rejected more rows than ``options.max_rejected`` allows (a count, or a
    share of ``report.rows_in``).

    Raises:
        RejectedRowsError: with the run's report; its rows and quarantine are committed.

    Example::

        check_rejected(report, InvalidRowOptions(handle_invalid="quarantine", max_rejected="0.1%"))
    """
    count, share = rejected_limit(options.max_rejected)
    rejected = report.rows_rejected
    if count is not None and rejected > count:
        limit = f"{count} row(s)"
    elif share is not None and rejected > share * report.rows_in:
        limit = f"{share:.4%} of its {report.rows_in} row(s)"
    else:
        return
    where = "quarantined" if options.handle_invalid == "quarantine" else "skipped"
    raise RejectedRowsError(
        f"max_rejected: the run rejected {rejected} row(s), more than {limit}; they are {where} and the rest "
        f"committed ({report.summary()}): fix their ids, or allow more rejected rows",
        report=report,
    )


def warn_capacity(
    report: JobReport, output: str, job: str, *, storage_options: Mapping[str, str] | None = None
) -> JobReport:
    """``report`` with a warning (also logged) for each codec of the table ``output`` that holds
    [`CAPACITY_WARNING`][spark_mlt.batch.job.capacity.CAPACITY_WARNING] of its capacity or more
    (``Usage.warning``, in the words of ``job``: ``tokenize`` or ``sync``), from the table's
    statistics and vocabularies (no data is read).

    Example::

        report = warn_capacity(report, "out/orders_mlt", "tokenize")
    """
    if report.write is None or report.dry_run:
        return report
    try:
        usage = capacity_usage(read_snapshot(output, storage_options=storage_options))
    except MLTError as error:  # a warning never fails a run that committed
        log.debug("capacity of %s not measured: %s", output, error)
        return report
    run_log = RunLog(warnings=list(report.warnings))
    for _, use in sorted(usage.items()):
        text = use.warning(job)
        if text is not None:
            run_log.warn(text)
    return dataclasses.replace(report, warnings=tuple(run_log.warnings))
