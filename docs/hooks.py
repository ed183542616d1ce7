"""mkdocs hook: the CLI reference, generated from the real ``spark-mlt`` parser.

A line ``<!-- spark-mlt cli reference -->`` in a page becomes the ``--help`` text of
``spark-mlt`` and of each of its commands, so the reference cannot drift from the code.
"""

from __future__ import annotations

import os
from typing import Any

from spark_mlt.batch.cli import build_parser, command_parsers

MARKER = "<!-- spark-mlt cli reference -->"


def cli_reference() -> str:
    """The help of ``spark-mlt`` and of each command, as Markdown: one ``###`` per command."""
    os.environ["COLUMNS"] = "100"  # argparse wraps to $COLUMNS: a stable width for the page
    parser = build_parser()
    parts = ["### spark-mlt", "", "```text", parser.format_help().rstrip(), "```", ""]
    for name, command in command_parsers(parser).items():
        parts += [f"### spark-mlt {name}", "", "```text", command.format_help().rstrip(), "```", ""]
    return "\n".join(parts)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    """Replace the marker line with the generated reference."""
    if MARKER not in markdown:
        return markdown
    return "\n".join(cli_reference() if line.strip() == MARKER else line for line in markdown.split("\n"))
