"""The notebooks in ``notebooks/`` run top to bottom on small data and show what they claim.

Each notebook is executed with nbclient in a fresh kernel of this interpreter (the venv's
``python3`` kernel spec, found first through ``JUPYTER_PATH``), inside a temporary working
directory, with ``SPARK_MLT_NOTEBOOK_ROWS`` making the data small. The notebooks are committed
without outputs, so they cannot go stale: these tests regenerate the outputs in memory and
check them, and a probe cell appended after the last cell reports the kernel's interpreter
and the comparison's result table as JSON.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import ROOT

nbformat = pytest.importorskip("nbformat", reason="the notebook tests need the dev extra (nbformat)")
nbclient = pytest.importorskip("nbclient", reason="the notebook tests need the dev extra (nbclient)")
pytest.importorskip("ipykernel", reason="the notebook tests need the dev extra (ipykernel)")

NOTEBOOKS = ROOT / "notebooks"
CELL_TIMEOUT = 600  # seconds per cell; Spark's first queries are slow on a busy 2-core machine
PROBE_MARK = "NOTEBOOK-TEST-PROBE "
PROBE = f"import json as _json, sys as _sys\nprint({PROBE_MARK!r} + _json.dumps({{'prefix': _sys.prefix}}))"

# pytest's filterwarnings = error applies to the test process, which runs nbclient and jupyter_client.
# With the versions installed here they warn about nothing; these two known warnings of other releases
# (jupyter_core 5.x before the platformdirs switch, jupyter_client on Python 3.12+) are not ours to fix.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:Jupyter is migrating its paths:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:datetime.datetime.utcnow:DeprecationWarning:jupyter_client.*"),
]


def execute_notebook(
    name: str, workdir: Path, monkeypatch: pytest.MonkeyPatch, rows: int, probe: str = PROBE
) -> tuple[Any, str, list[Any]]:
    """Run a committed notebook with a probe cell appended.

    Returns:
        The notebook with its outputs, its whole stdout, and the JSON values the probe printed.
    """
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(not cell.outputs and cell.execution_count is None for cell in code_cells), (
        f"{name} is committed with outputs; clear them (e.g. jupyter nbconvert --clear-output --inplace)"
    )
    assert "parameters" in code_cells[0].metadata.get("tags", []), f"{name}: the first code cell is not tagged"

    monkeypatch.setenv("SPARK_MLT_NOTEBOOK_ROWS", str(rows))
    monkeypatch.setenv("SPARK_MLT_NOTEBOOK_ML_DIR", "synthetic")  # never pick up a real release in data/
    # This venv's kernel spec first, whatever other python3 kernels the machine has.
    monkeypatch.setenv("JUPYTER_PATH", str(Path(sys.prefix) / "share" / "jupyter"))
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel's inline backend renders the figures
    monkeypatch.setenv("TMPDIR", str(workdir))  # the notebooks' temporary folders land under tmp_path
    notebook.cells.append(nbformat.v4.new_code_cell(probe))
    client = nbclient.NotebookClient(
        notebook,
        kernel_name="python3",
        timeout=CELL_TIMEOUT,
        startup_timeout=120,
        resources={"metadata": {"path": str(workdir)}},
    )
    client.execute()  # raises CellExecutionError, with the cell and traceback, on the first error
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            assert output.output_type != "error", f"{name}: {output.ename}: {output.evalue}"
    stdout = "".join(
        output.text
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if output.output_type == "stream" and output.name == "stdout"
    )
    probes = [json.loads(line[len(PROBE_MARK) :]) for line in stdout.splitlines() if line.startswith(PROBE_MARK)]
    assert probes, f"{name}: the probe cell printed nothing"
    assert probes[0]["prefix"] == sys.prefix, f"{name} ran in {probes[0]['prefix']}, not this venv ({sys.prefix})"
    return notebook, stdout, probes


def count_images(notebook: Any) -> int:
    return sum("image/png" in output.get("data", {}) for cell in notebook.cells for output in cell.get("outputs", []))


def test_quickstart_round_trips_and_reads_codecs_back_from_delta(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NumPy, Spark and Delta round trips are exact, the codecs come back from the table properties,
    and the neighbour plot is drawn."""
    rows = 2_000
    notebook, stdout, _ = execute_notebook("quickstart.ipynb", tmp_path, monkeypatch, rows)

    assert "NumPy round trip exact: True" in stdout
    assert "all their token differences equal M's last row: True" in stdout
    assert "Spark tokens equal NumPy's: True" in stdout
    assert "Spark round trip mismatches: 0" in stdout
    assert "codecs read back equal the job's: True" in stdout
    delta = re.search(r"Delta round trip: ([\d,]+) rows, mismatches: (\d+)", stdout)
    assert delta is not None, stdout[-2000:]
    assert (int(delta.group(1).replace(",", "")), int(delta.group(2))) == (rows, 0)
    assert count_images(notebook) >= 1


def test_encoding_comparison_reproduces_the_papers_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The notebook tokenizes a small synthetic release and runs ``spark-mlt paper`` on it (one
    epoch, two methods: tests/ml/test_paper.py trains every method): its table has the paper's
    sizes and the plot is drawn."""
    monkeypatch.setenv("SPARK_MLT_NOTEBOOK_EPOCHS", "1")
    monkeypatch.setenv("SPARK_MLT_NOTEBOOK_METHODS", "hashing,mlt")
    probe = PROBE + f"\nprint({PROBE_MARK!r} + results.to_json(orient='records'))"
    notebook, stdout, probes = execute_notebook("encoding_comparison.ipynb", tmp_path, monkeypatch, 5_000, probe)
    results = {row["key"]: row for row in probes[1]}

    assert list(results) == ["hashing", "mlt"]
    assert results["mlt"]["dims"] == 14
    assert results["hashing"]["dims"] == 512
    assert results["mlt"]["reversible"]
    assert not results["hashing"]["reversible"]
    for row in results.values():
        assert 0 < row["accuracy"] <= 1
        assert row["epochs"] == 1
    assert "5,000 synthetic ratings with planted user and movie effects" in stdout
    assert count_images(notebook) >= 1
