"""The ``spark-mlt`` command: the jobs ``movielens``, ``tokenize``, ``sync``, ``decode`` and
``paper``, the table commands ``inspect``, ``vacuum``, ``erase``, ``find`` and ``publish``, and
``jar`` ([`COMMANDS`][spark_mlt.batch.cli.COMMANDS] lists them; the CLI reference page is
generated from the parser).

The same flags work as ``spark-submit jobs/<job>.py ...``. Exit codes:
[`EXIT_OK`][spark_mlt.batch.cli.EXIT_OK] (0), [`EXIT_FAILURE`][spark_mlt.batch.cli.EXIT_FAILURE] (1,
with a one-line reason on stderr), [`EXIT_USAGE`][spark_mlt.batch.cli.EXIT_USAGE] (2: a bad flag or
option value, a missing required flag, a bad conf file),
[`EXIT_MISMATCH`][spark_mlt.batch.cli.EXIT_MISMATCH] (3: ``decode --verify`` found decoded ids that
differ from the originals), [`EXIT_REJECTED`][spark_mlt.batch.cli.EXIT_REJECTED] (4: more rows rejected
than ``--max-rejected`` allows; the rows and quarantine are committed) and
[`EXIT_INTERRUPTED`][spark_mlt.batch.cli.EXIT_INTERRUPTED] (130). An option the job's tables cannot
take (other columns, key, codec or layout than they hold; a column the input lacks) is a usage
error too: exit 2, before anything is written.

One vocabulary, derived: every command's flags come from its arguments (a job's from its
function's: ``input``, ``output``, ``columns``) and its options dataclass's fields
([`spark_mlt.batch.job.options`][spark_mlt.batch.job.options], `spark_mlt.paper.PaperOptions`), walked by
[`add_flags`][spark_mlt.batch.cli.flags.add_flags]: the flag of ``data_page_version`` is
``--data-page-version``, its conf-file key ``data_page_version`` (dashes accepted too), its type and
choices those of the field's annotation (a ``Literal``'s values become the choices), its help the
field's ``metadata["help"]``. Options can come from a YAML or JSON file (``--config
conf/movielens.yaml``); flags given on the command line win; a key that is no flag of the command is
refused by name. A job argument is a required flag unless the conf file gives it. A
[`Job`][spark_mlt.batch.cli.Job] and a [`TableCommand`][spark_mlt.batch.cli.TableCommand] are
built into the parser alike.

How to run, beside what to run: ``--master`` (default: the ``spark.master`` of the
``spark-defaults.conf`` that ``pyspark`` reads, else ``local[2]``; a local master also gets
[`spark_mlt.batch.job.session.LOCAL_CONF`][spark_mlt.batch.job.session.LOCAL_CONF] where the defaults file
does not set a key), ``--conf KEY=VALUE`` for the session the command starts, ``-v``/``-q``
(before or after the command) for the ``spark_mlt`` logger (Spark's log level follows), and
``--json`` for a job's report as one JSON document. Every error line on stderr starts with
[`ERROR_PREFIX`][spark_mlt.batch.cli.ERROR_PREFIX], ``spark-mlt: error: ``.

Library errors name the Python parameter (``MLTError.parameter``); only this package speaks of
flags, and it maps a parameter to its flag by the same rule (``layout`` -> ``--layout``).

Its modules, in the order a command line goes through them: ``flags`` (the shared vocabulary:
flags from fields, conf values, exit codes, verbosity), ``jobs`` (the job commands),
``tables`` (the table commands), ``parser`` (the argument parser) and ``main`` (the entry
point).

Example::

    spark-mlt movielens --input data/ml-25m --output out/ratings_mlt --mode overwrite
    spark-mlt decode --input out/ratings_mlt --verify
    spark-mlt inspect --input out/ratings_mlt
    spark-mlt paper --input out/ratings_mlt --output out/paper
"""

from __future__ import annotations

from spark_mlt.batch.cli.flags import (
    ERROR_PREFIX,
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_MISMATCH,
    EXIT_OK,
    EXIT_REJECTED,
    EXIT_USAGE,
    OptionsError,
    UsageError,
    add_flags,
    configure_logging,
    flag_of,
)
from spark_mlt.batch.cli.jobs import JOBS, Job, JobForm
from spark_mlt.batch.cli.main import main, run
from spark_mlt.batch.cli.parser import COMMANDS, build_parser, command_parsers
from spark_mlt.batch.cli.tables import TABLE_COMMANDS, TableCommand

__all__ = [
    "COMMANDS",
    "ERROR_PREFIX",
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_MISMATCH",
    "EXIT_OK",
    "EXIT_REJECTED",
    "EXIT_USAGE",
    "JOBS",
    "TABLE_COMMANDS",
    "Job",
    "JobForm",
    "OptionsError",
    "TableCommand",
    "UsageError",
    "add_flags",
    "build_parser",
    "command_parsers",
    "configure_logging",
    "flag_of",
    "main",
    "run",
]
