"""The vocabulary every command shares: a Python name's flag, the flags derived from an options
dataclass's fields and the options built from them, a conf file's values, the exit codes and
the verbosity.

Example::

    flag_of("data_page_version")  # '--data-page-version'
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import types
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, Union, get_args, get_origin, get_type_hints

import yaml

from spark_mlt.errors import MLTError


class UsageError(ValueError):
    """A problem with the command line or conf file itself: a missing flag, an unknown key."""


class OptionsError(UsageError):
    """An option value its options class refused (its ``__cause__``, an ``MLTError`` naming
    the parameter): a usage error too, found before any Spark work."""


def flag_of(name: str) -> str:
    """The flag of a Python name (a job's argument or an options field): ``--`` and the name
    with dashes (``data_page_version`` -> ``--data-page-version``)."""
    return "--" + name.replace("_", "-")


@dataclass(frozen=True)
class Flag:
    """One flag of a job command, derived from a job argument or an options field."""

    name: str
    hint: Any
    help: str
    required: bool = False


class Command(Protocol):
    """A ``spark-mlt`` command as the parser builds it: its flags, help and examples.

    Attributes:
        help: its one-line help.
        examples: command lines shown in its ``--help``.
        run_flags: the flags of how it runs (names of `RUN_FLAGS`), beside what it does.
        report: whether it prints a job's report (``--json`` prints it as JSON).
    """

    @property
    def help(self) -> str: ...

    @property
    def examples(self) -> tuple[str, ...]: ...

    @property
    def run_flags(self) -> tuple[str, ...]: ...

    @property
    def report(self) -> bool: ...

    def own_flags(self) -> list[Flag]:
        """Its flags, but those of another form it may have."""

    def flags(self) -> list[Flag]:
        """All its flags."""


#: The flags of how a command runs, not what it does, and their help.
RUN_FLAGS: dict[str, str] = {
    "config": "YAML or JSON file of options, keys as the flags (flags override it)",
    "master": "Spark master (default: spark.master of spark-defaults.conf under SPARK_CONF_DIR or SPARK_HOME/conf, "
    "else local[2]; a local master gets local defaults)",
    "conf": "a Spark setting for the session this command starts (repeatable; a catalog's, e.g. "
    "spark.sql.catalogImplementation=hive); wins over the defaults",
}


def unwrap_optional(hint: Any) -> Any:
    if get_origin(hint) in (Union, types.UnionType):
        args = [arg for arg in get_args(hint) if arg is not type(None)]
        if len(args) == 1:
            return args[0]
    return hint


def _is_sequence(hint: Any) -> bool:
    return get_origin(hint) in (tuple, list, Sequence)


def is_mapping(hint: Any) -> bool:
    return get_origin(hint) in (dict, Mapping)


def add_flags(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    flags: Iterable[Flag],
    *,
    required: argparse._ArgumentGroup | None = None,
    given: Iterable[str] = (),
) -> None:
    """Add one ``--flag`` per [`Flag`][spark_mlt.batch.cli.Flag], typed by its annotation: a
    ``Literal`` gives the choices, ``bool`` ``--x/--no-x``, a sequence ``x [x ...]`` (or ``a,b``),
    a mapping ``key=value`` words (a sequence's or mapping's flag given twice adds up). Every
    default is None, so an absent flag leaves the conf file's value (or the dataclass default)
    in place. A required flag goes to the ``required`` group, and is required unless its name
    is in ``given`` (the conf file's keys)."""
    for flag in flags:
        hint = unwrap_optional(flag.hint)
        kwargs: dict[str, Any] = {
            "dest": flag.name,
            "default": None,
            "help": flag.help.replace("%", "%%"),
        }  # argparse formats help with %
        if get_origin(hint) is Literal:
            choices = get_args(hint)
            kwargs.update(type=type(choices[0]), choices=choices)
        elif hint is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif is_mapping(hint):
            kwargs.update(action="extend", nargs="+", metavar="KEY=VALUE")
        elif _is_sequence(hint):
            kwargs.update(action="extend", nargs="+")
        elif hint in (int, float, str):
            kwargs["type"] = hint
        elif get_origin(hint) in (Union, types.UnionType) and set(get_args(hint)) - {type(None)} <= {int, float, str}:
            kwargs["type"] = str  # a count or a share: the options parse it
        else:  # pragma: no cover - a field type the generator does not know yet
            raise TypeError(f"no flag type for {flag.name}: {flag.hint!r}")
        group = required if flag.required and required is not None else parser
        if flag.required:
            kwargs["required"] = flag.name not in set(given)
        group.add_argument(flag_of(flag.name), **kwargs)


def _default_text(field: dataclasses.Field[Any]) -> str:
    default = field.default
    if default is dataclasses.MISSING or default in (None, (), False):
        return ""
    return f" (default: {' '.join(map(str, default)) if isinstance(default, tuple) else default})"


def _required(field: dataclasses.Field[Any]) -> bool:
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


def option_flags(options: type[Any]) -> list[Flag]:
    """The flags of an options dataclass: one per field, help from ``metadata["help"]``,
    required where the field has no default."""
    hints = get_type_hints(options)
    return [
        Flag(f.name, hints[f.name], str(f.metadata.get("help", "")) + _default_text(f), required=_required(f))
        for f in dataclasses.fields(options)
    ]


def build_options(options: type[Any], values: Mapping[str, Any]) -> Any:
    """An options dataclass from the values of its fields (the options check them).

    Raises:
        UsageError: a field without a default is missing.
        OptionsError: the options refused a value.
    """
    fields = dataclasses.fields(options)
    missing = [flag_of(f.name) for f in fields if f.name not in values and _required(f)]
    if missing:
        raise UsageError(f"missing required option(s) {', '.join(missing)}")
    try:
        return options(**{f.name: values[f.name] for f in fields if f.name in values})
    except MLTError as exc:
        raise OptionsError(str(exc)) from exc


def given_values(flags: Iterable[Flag], args: argparse.Namespace) -> dict[str, Any]:
    """The values of the flags given on the command line, each as its field takes it."""
    return {
        flag.name: flag_value(flag, getattr(args, flag.name))
        for flag in flags
        if getattr(args, flag.name, None) is not None
    }


#: Exit codes of ``spark-mlt``.
EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_MISMATCH, EXIT_REJECTED, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130


#: What starts every error line the command prints on stderr.
ERROR_PREFIX = "spark-mlt: error: "


def load_config(path: str | None) -> dict[str, Any]:
    """The options of a YAML or JSON conf file, keys with underscores."""
    if not path:
        return {}
    text = Path(path).read_text()
    loaded = (yaml.safe_load(text) or {}) if path.endswith((".yaml", ".yml")) else json.loads(text)
    if not isinstance(loaded, dict):
        raise UsageError(f"{path} must hold a mapping of option names to values")
    return {str(key).replace("-", "_"): value for key, value in loaded.items()}


def names_of(values: str | Sequence[str] | None) -> list[str] | None:
    """Names given as separate words, comma-separated, or both (``a b``, ``a,b``)."""
    if values is None:
        return None
    words = [values] if isinstance(values, str) else values
    return [name.strip() for word in words for name in str(word).split(",") if name.strip()]


def parse_pairs(name: str, values: Mapping[str, Any] | Sequence[str], kind: Any) -> dict[str, Any]:
    """``key=value`` words (or a conf file's mapping) as a dict, values of type ``kind``."""
    if isinstance(values, Mapping):
        return dict(values)
    pairs = {}
    for word in [values] if isinstance(values, str) else values:
        key, sep, value = word.partition("=")
        if not sep:
            raise UsageError(f"{flag_of(name)} takes key=value words; got {word!r}")
        try:
            pairs[key] = kind(value) if kind in (int, float) else value
        except ValueError:
            raise UsageError(f"{flag_of(name)}: {key} takes a {kind.__name__}; got {value!r}") from None
    return pairs


def flag_value(flag: Flag, value: Any) -> Any:
    """A flag's or conf key's value as its field takes it (sequences and mappings parsed)."""
    hint = unwrap_optional(flag.hint)
    if is_mapping(hint):
        return parse_pairs(flag.name, value, (get_args(hint) or (str, str))[1])
    if _is_sequence(hint):
        return tuple(names_of(value) or ())
    return value


#: The ``spark_mlt`` logger's level per verbosity (``-v`` minus ``-q``), and Spark's.
_LEVELS = {
    -2: (logging.ERROR, "ERROR"),
    -1: (logging.WARNING, "ERROR"),
    0: (logging.INFO, "WARN"),
    1: (logging.DEBUG, "INFO"),
}


def verbosity_of(args: argparse.Namespace) -> int:
    """``-v`` minus ``-q``, given before the command and after it, within the levels."""
    counts = {name: getattr(args, name, 0) + getattr(args, f"global_{name}", 0) for name in ("verbose", "quiet")}
    return max(-2, min(1, counts["verbose"] - counts["quiet"]))


def spark_level(args: argparse.Namespace) -> str:
    return _LEVELS[verbosity_of(args)][1]


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to the current ``sys.stderr`` (which tests and notebooks swap), not the one at start."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def configure_logging(verbosity: int = 0) -> None:
    """Log lines of the ``spark_mlt`` logger to stderr, at INFO (``verbosity`` 0), DEBUG (1),
    WARNING (-1) or ERROR (-2); other libraries' loggers are left as they are."""
    logger = logging.getLogger("spark_mlt")
    logger.setLevel(_LEVELS[max(-2, min(1, verbosity))][0])
    if not any(isinstance(handler, _StderrHandler) for handler in logger.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
    logger.propagate = False
