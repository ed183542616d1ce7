"""Deletion vectors decoded jar-free (`spark_mlt.delta.read.deletion_vectors`).

Four oracles: the protocol's own examples; the vectors delta-spark wrote into the table zoo,
decoded by delta-rs (``DeltaTable.deletion_vectors()``) for every version; pyroaring (CRoaring)
for every Roaring container kind and 64-bit keys; and hand-corrupted vectors, which must be
refused with a message that names the vector and what was expected.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pytest
from deltalake import DeltaTable
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_mlt.delta.fs import Location, locate
from spark_mlt.delta.read.deletion_vectors import (
    MAGIC,
    DeletionVector,
    deleted_runs,
    read_deleted_rows,
    z85_decode,
)
from spark_mlt.errors import MLTError, TableError, TableFeatureError
from tests.support.vectors import (
    UUID_Z85,
    deleted,
    inline_vector,
    record,
    serialize,
    uuid_file_vector,
    write_vector_file,
    z85_encode,
)
from tests.support.zoo import Zoo

# --- the protocol's examples --------------------------------------------------------------------

PROTOCOL_UUID = {"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^", "offset": 4, "sizeInBytes": 40,
                 "cardinality": 6}  # fmt: skip
PROTOCOL_INLINE = {"storageType": "i", "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L",
                   "sizeInBytes": 40, "cardinality": 6}  # fmt: skip


def test_z85_decodes_the_rfc_example() -> None:
    assert z85_decode("HelloWorld") == bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])
    assert z85_decode("") == b""


@pytest.mark.parametrize(
    ("text", "message"),
    [("Hell", "has 4 bytes; expected a multiple of 5"), ("Hell~", "holds '~' at byte 4"), ("#####", "exceeds 32 bits")],
)
def test_z85_refuses_what_is_no_z85(text: str, message: str) -> None:
    with pytest.raises(TableError, match=message):
        z85_decode(text)


def test_protocol_example_1_derives_the_file_path_from_prefix_and_uuid(tmp_path: Path) -> None:
    dv = DeletionVector.from_json(PROTOCOL_UUID)
    assert dv.relative_path == "ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    assert (
        dv.file_path(locate(str(tmp_path))) == f"{tmp_path}/ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    )
    s3 = locate("s3://mytable", {"AWS_REGION": "us-east-1"})
    assert dv.file_path(s3) == "mytable/ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    without_prefix = DeletionVector.from_json({**PROTOCOL_UUID, "pathOrInlineDv": UUID_Z85})
    assert without_prefix.relative_path == "deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"


def test_unique_id_is_storage_type_and_path_then_the_offset_when_there_is_one() -> None:
    assert DeletionVector.from_json(PROTOCOL_UUID).unique_id == "uab^-aqEH.-t@S}K{vb[*k^@4"
    inline = DeletionVector.from_json(PROTOCOL_INLINE)
    assert inline.offset is None
    assert inline.unique_id == "iwi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L"
    assert DeletionVector.from_json({**PROTOCOL_UUID, "offset": None}).unique_id == "uab^-aqEH.-t@S}K{vb[*k^"
    assert DeletionVector.from_json(PROTOCOL_UUID).relative_path is not None
    assert inline.relative_path is None


def test_protocol_inline_example_is_refused_as_delta_spark_and_delta_rs_refuse_it() -> None:
    """The protocol's inline example is not in the layout its own text describes: its 40 bytes
    are Delta's native layout (magic 1681511376, a bitmap count, a bitmap size) written
    big-endian, which delta-spark's little-endian reader and delta-rs ("Invalid magic
    3503503716") both refuse. Its 32-bit Roaring bitmap (after that 12-byte header) holds the
    rows the protocol names, and does decode once put in the portable layout."""
    example = DeletionVector.from_json(PROTOCOL_INLINE)
    with pytest.raises(TableError, match=r"magic number 3503503716: Delta's native layout written big-endian"):
        read_deleted_rows(example, None)
    data = z85_decode(str(PROTOCOL_INLINE["pathOrInlineDv"]))
    assert data[:12] == (1681511376).to_bytes(4, "big") + (1).to_bytes(4, "big") + (28).to_bytes(4, "big")
    portable = MAGIC.to_bytes(4, "little") + (1).to_bytes(8, "little") + (0).to_bytes(4, "little") + data[12:]
    rows = read_deleted_rows(inline_vector(portable, 6), None)
    assert rows.tolist() == [3, 4, 7, 11, 18, 29]
    assert rows.dtype == np.uint64


def test_native_layout_is_left_to_delta_spark() -> None:
    native = (1681511376).to_bytes(4, "little") + (0).to_bytes(4, "little")
    with pytest.raises(TableFeatureError, match="native RoaringBitmapArray layout") as caught:
        read_deleted_rows(inline_vector(native, 0), None)
    assert caught.value.feature == "deletionVectors"


# --- delta-spark's vectors, against delta-rs -------------------------------------------------

#: Zoo tables with deletion vectors (and no checkpoint, so the JSON commits are the whole log).
DV_TABLES = ["dv", "dv_inline", "dv_special", "cdf", "cm_id", "cm_name", "ours_deleted"]


def _replay(log: Path, version: int) -> dict[str, dict[str, Any]]:
    """The add actions of ``version``, by percent-decoded path: a small replay of JSON commits.
    A file is the pair of its path and its vector (a commit may remove a file's old vector and
    add its new one, in either order)."""
    live: dict[tuple[str, str | None], dict[str, Any]] = {}
    for commit in range(version + 1):
        for line in (log / f"{commit:020d}.json").read_text().splitlines():
            action = json.loads(line)
            for kind in ("add", "remove"):
                if kind in action:
                    dv = action[kind].get("deletionVector")
                    key = (unquote(action[kind]["path"]), DeletionVector.from_json(dv).unique_id if dv else None)
                    if kind == "add":
                        live[key] = action[kind]
                    else:
                        live.pop(key, None)
    files = {path for path, _ in live}
    assert len(files) == len(live), f"a file with two vectors in version {version}"
    return {path: add for (path, _), add in live.items()}


@pytest.mark.parametrize("name", DV_TABLES)
def test_delta_spark_vectors_decode_as_delta_rs_decodes_them_in_every_version(zoo: Zoo, name: str) -> None:
    missing = zoo.missing(name)
    if missing:
        pytest.skip(missing)
    path = Path(zoo.path(name))
    log = path / "_delta_log"
    assert not list(log.glob("*checkpoint*")), f"{name} has a checkpoint: the replay reads JSON commits only"
    location = locate(str(path))
    latest = max(int(commit.stem) for commit in log.glob("*.json"))
    vectors = 0
    for version in range(latest + 1):
        ours: dict[str, list[int]] = {}
        for file, add in _replay(log, version).items():
            if add.get("deletionVector"):
                rows = read_deleted_rows(DeletionVector.from_json(add["deletionVector"]), location)
                ours[file] = rows.tolist()
        masks = pa.table(DeltaTable(str(path), version=version).deletion_vectors())
        root = unquote(DeltaTable(str(path), version=version).table_uri).rstrip("/") + "/"
        theirs = {
            unquote(uri)[len(root) :]: np.flatnonzero(~np.asarray(mask, dtype=bool)).tolist()
            for uri, mask in zip(
                masks.column("filepath").to_pylist(), masks.column("selection_vector").to_pylist(), strict=True
            )
        }
        assert ours == theirs, f"{name}@{version}"
        vectors += len(ours)
    assert vectors, f"{name} has no deletion vector in any version"


def test_zoo_vectors_include_inline_and_shared_files(zoo: Zoo) -> None:
    """The comparison above is not vacuous: the zoo has inline vectors (padded to whole Z85
    blocks) and vector files shared by several vectors at offsets other than 1."""
    kinds = set()
    for name in ("dv", "dv_inline"):
        for commit in (Path(zoo.path(name)) / "_delta_log").glob("*.json"):
            for line in commit.read_text().splitlines():
                dv = json.loads(line).get("add", {}).get("deletionVector")
                if dv:
                    kinds.add((dv["storageType"], dv.get("offset") not in (None, 1), dv["sizeInBytes"] % 4 != 0))
    assert ("i", False, True) in kinds
    assert ("u", True, False) in kinds or ("u", True, True) in kinds


# --- every container kind, pyroaring as the encoder ---------------------------------------------


def test_one_vector_with_every_container_kind_and_several_buckets(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    parts = [
        rng.choice(65_536, 300, replace=False),  # an array container
        65_536 + rng.choice(65_536, 30_000, replace=False),  # a bitmap container
        np.arange(3 * 65_536 + 5, 3 * 65_536 + 40_000),  # a run container
        np.arange(4 * 65_536, 5 * 65_536),  # a full run container (length - 1 = 65535)
        (1 << 32) + np.array([0, 1, 2, 10, 65_535, 65_536]),  # a second bucket
        (((1 << 31) - 1) << 32) + np.array([7, 9]),  # the largest key Delta allows
    ]
    rows = deleted(np.concatenate(parts))
    data = serialize(rows, run_optimize=True)
    assert int.from_bytes(data[16:20], "little") & 0xFFFF == 12347  # the first bucket has runs
    dv = uuid_file_vector(tmp_path, data, rows.size, prefix="ab", before=serialize(deleted([1, 2]), run_optimize=False))
    assert dv.offset not in (None, 1)
    assert np.array_equal(read_deleted_rows(dv, locate(str(tmp_path))), rows)


@pytest.mark.parametrize("run_optimize", [False, True])
def test_small_bitmaps_with_and_without_an_offset_header(run_optimize: bool) -> None:
    """A bitmap with run containers has no offset header below 4 containers; one without runs
    always has one."""
    for rows in ([5], list(range(100, 300)), [*range(10, 5000), 70_000, *range(140_000, 150_000)], []):
        expected = deleted(rows)
        dv = inline_vector(serialize(expected, run_optimize=run_optimize), len(expected))
        assert np.array_equal(read_deleted_rows(dv, None), expected)


@st.composite
def row_sets(draw: st.DrawFn) -> npt.NDArray[np.uint64]:
    """Row indexes: sparse, dense (bitmap containers) and run-shaped pieces, some above 2**32."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    pieces = []
    for _ in range(draw(st.integers(0, 4))):
        key = draw(st.sampled_from([0, 0, 0, 1, 2, 3, (1 << 31) - 1]))
        base = (key << 32) + draw(st.integers(0, (1 << 32) - (1 << 18)))
        shape = draw(st.sampled_from(["sparse", "dense", "runs"]))
        if shape == "sparse":
            pieces.append(base + rng.choice(1 << 18, draw(st.integers(1, 3_000)), replace=False))
        elif shape == "dense":
            span = draw(st.integers(1, 4)) << 16
            pieces.append(base + np.flatnonzero(rng.random(span) < draw(st.floats(0.05, 0.95))))
        else:
            lengths = rng.integers(1, draw(st.integers(2, 5_000)), draw(st.integers(1, 40)))
            gaps = rng.integers(1, 3_000, lengths.size)
            starts = base + np.cumsum(gaps + lengths) - lengths
            pieces.extend(np.arange(start, start + length) for start, length in zip(starts, lengths, strict=True))
    return deleted(np.concatenate(pieces)) if pieces else deleted([])


@settings(max_examples=60, deadline=None)
@given(rows=row_sets(), run_optimize=st.booleans(), storage=st.sampled_from(["inline", "alone", "shared"]))
def test_pyroaring_bitmaps_decode_to_their_rows(
    tmp_path_factory: pytest.TempPathFactory, rows: npt.NDArray[np.uint64], run_optimize: bool, storage: str
) -> None:
    """Whatever CRoaring serializes (array, bitmap and run containers, with and without offset
    headers, in several buckets), inline or in a file (alone, or after another vector)."""
    data = serialize(rows, run_optimize=run_optimize)
    location: Location | None = None
    if storage == "inline":
        dv = inline_vector(data, rows.size)
    else:
        table = tmp_path_factory.mktemp("table")
        before = serialize(deleted([0, 9]), run_optimize=False) if storage == "shared" else None
        dv, location = uuid_file_vector(table, data, rows.size, prefix="xy", before=before), locate(str(table))
    decoded = read_deleted_rows(dv, location)
    assert decoded.dtype == np.uint64
    assert np.array_equal(decoded, rows)


# --- where vector files are ---------------------------------------------------------------------


def test_absolute_path_vectors_are_read_from_the_same_local_store(tmp_path: Path) -> None:
    table, elsewhere = tmp_path / "table", tmp_path / "other place"
    table.mkdir()
    elsewhere.mkdir()
    rows = deleted([0, 5, 6, 7, 1_000_000])
    data = serialize(rows, run_optimize=False)
    file = elsewhere / "deletion_vector_é.bin"
    offset = write_vector_file(file, [data])[0]
    for written in ("file:" + quote(str(file)), "file://" + quote(str(file)), quote(str(file))):
        dv = DeletionVector("p", written, offset, len(data), rows.size)
        assert dv.file_path(locate(str(table))) == str(file)
        assert np.array_equal(read_deleted_rows(dv, locate(str(table))), rows)


def test_protocol_example_2_absolute_path_is_read_from_the_s3_location() -> None:
    example = {**PROTOCOL_UUID, "storageType": "p",
               "pathOrInlineDv": "s3://mytable/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"}  # fmt: skip
    s3 = locate("s3://mytable", {"AWS_REGION": "us-east-1"})
    path = DeletionVector.from_json(example).file_path(s3)
    assert path == "mytable/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"


def test_absolute_path_vectors_in_another_store_are_refused() -> None:
    s3 = locate("s3a://bucket/table", {"AWS_REGION": "us-east-1"})
    assert DeletionVector("p", "s3a://other/dv%20x.bin", 1, 40, 6).file_path(s3) == "other/dv x.bin"
    with pytest.raises(TableFeatureError, match=r"gs://bucket/dv\.bin, outside the store"):
        DeletionVector("p", "gs://bucket/dv.bin", 1, 40, 6).file_path(s3)
    with pytest.raises(TableFeatureError, match="outside the store"):
        DeletionVector("p", "s3://bucket/dv.bin", 1, 40, 6).file_path(locate("/tmp/table"))


def test_a_vector_without_offset_starts_after_the_version_byte(tmp_path: Path) -> None:
    rows = deleted([3, 4])
    data = serialize(rows, run_optimize=False)
    dv = uuid_file_vector(tmp_path, data, rows.size)
    no_offset = DeletionVector(dv.storage_type, dv.path_or_inline_dv, None, dv.size_in_bytes, dv.cardinality)
    assert np.array_equal(read_deleted_rows(no_offset, locate(str(tmp_path))), rows)


# --- corrupt vectors ----------------------------------------------------------------------------


@pytest.fixture
def stored(tmp_path: Path) -> tuple[DeletionVector, Location, Path]:
    """A valid vector of 5 rows in a file under ``tmp_path``, its location and its file."""
    rows = deleted([1, 2, 3, 70_000, 1 << 33])
    dv = uuid_file_vector(tmp_path, serialize(rows, run_optimize=False), rows.size)
    location = locate(str(tmp_path))
    return dv, location, Path(str(dv.file_path(location)))


def _rewrite(file: Path, change: Any) -> None:
    blob = bytearray(file.read_bytes())
    change(blob)
    file.write_bytes(bytes(blob))


def _with_data(dv: DeletionVector, file: Path, data: bytes) -> DeletionVector:
    """``file`` holding ``data`` (with a right size and checksum) as its only vector."""
    file.write_bytes(b"\x01" + record(data))
    return DeletionVector(dv.storage_type, dv.path_or_inline_dv, 1, len(data), dv.cardinality)


def test_the_valid_vector_reads(stored: tuple[DeletionVector, Location, Path]) -> None:
    dv, location, _ = stored
    assert read_deleted_rows(dv, location).tolist() == [1, 2, 3, 70_000, 1 << 33]


def test_wrong_format_version_is_refused(stored: tuple[DeletionVector, Location, Path]) -> None:
    dv, location, file = stored
    _rewrite(file, lambda blob: blob.__setitem__(0, 2))
    with pytest.raises(TableError, match=r"deletion vector u\^-aqEH.*\(file .*\) has format version 2; expected 1"):
        read_deleted_rows(dv, location)


def test_checksum_mismatch_is_refused(stored: tuple[DeletionVector, Location, Path]) -> None:
    dv, location, file = stored
    inside = 1 + 4 + 20  # a byte of the bitmap (the vector is the file's only one, at offset 1)
    _rewrite(file, lambda blob: blob.__setitem__(inside, blob[inside] ^ 0x40))
    with pytest.raises(TableError, match="fails its checksum: the file says CRC-32 0x"):
        read_deleted_rows(dv, location)


def test_size_mismatch_is_refused(stored: tuple[DeletionVector, Location, Path]) -> None:
    dv, location, _ = stored
    wrong = DeletionVector(dv.storage_type, dv.path_or_inline_dv, dv.offset, dv.size_in_bytes - 2, dv.cardinality)
    with pytest.raises(
        TableError, match=rf"size field of {dv.size_in_bytes} bytes .*sizeInBytes is {dv.size_in_bytes - 2}"
    ):
        read_deleted_rows(wrong, location)


def test_cardinality_mismatch_is_refused(stored: tuple[DeletionVector, Location, Path]) -> None:
    dv, location, _ = stored
    wrong = DeletionVector(dv.storage_type, dv.path_or_inline_dv, dv.offset, dv.size_in_bytes, 6)
    with pytest.raises(TableError, match="holds 5 row indexes; its descriptor says 6"):
        read_deleted_rows(wrong, location)


def test_truncated_file_is_refused(stored: tuple[DeletionVector, Location, Path]) -> None:
    dv, location, file = stored
    _rewrite(file, lambda blob: blob.__delitem__(slice(len(blob) - 3, None)))
    with pytest.raises(TableError, match=r"\(file .*deletion_vector_.*\.bin\) is truncated: the file ends at byte"):
        read_deleted_rows(dv, location)
    file.write_bytes(b"")
    with pytest.raises(TableError, match="is truncated: the file is empty"):
        read_deleted_rows(dv, location)


def test_missing_file_is_refused(stored: tuple[DeletionVector, Location, Path]) -> None:
    dv, location, file = stored
    file.unlink()
    with pytest.raises(TableError, match="is missing"):
        read_deleted_rows(dv, location)


def test_wrong_magic_is_refused(stored: tuple[DeletionVector, Location, Path]) -> None:
    dv, location, file = stored
    data = bytearray(serialize(deleted([1, 2, 3, 70_000, 1 << 33]), run_optimize=False))
    data[0] ^= 0x10
    with pytest.raises(TableError, match=rf"starts with magic number {MAGIC ^ 0x10}; expected {MAGIC}"):
        read_deleted_rows(_with_data(dv, file, bytes(data)), location)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda data: data[:-2], "is truncated: the container data needs bytes"),
        (lambda data: data[:26], "is truncated: the container header needs"),
        (lambda data: data[:4] + (100).to_bytes(8, "little") + data[12:], "counts 100 buckets, more than"),
        (lambda data: data[:16] + (999).to_bytes(4, "little") + data[20:], "starts with cookie 999"),
        (lambda data: data[:12] + (1 << 31).to_bytes(4, "little") + data[16:], "bucket key 2147483648"),
    ],
    ids=["containers", "header", "buckets", "cookie", "key"],
)
def test_inconsistent_bitmaps_are_refused(
    stored: tuple[DeletionVector, Location, Path], damage: Any, message: str
) -> None:
    dv, location, file = stored
    data = serialize(deleted([1, 2, 3, 70_000]), run_optimize=False)
    with pytest.raises(TableError, match=message):
        read_deleted_rows(_with_data(dv, file, damage(data)), location)


def test_a_container_whose_header_disagrees_with_its_runs_is_refused() -> None:
    data = bytearray(serialize(deleted(range(1000)), run_optimize=True))
    assert int.from_bytes(data[16:20], "little") & 0xFFFF == 12347
    header = 16 + 4 + 1  # cookie, one byte of run flags
    data[header + 2 : header + 4] = (998).to_bytes(2, "little")  # cardinality - 1: 999 instead of 1000
    with pytest.raises(TableError, match=r"run container .* of 1000 values; its header says 999"):
        read_deleted_rows(inline_vector(bytes(data), 999), None)


def test_inline_vectors_with_a_size_other_than_their_text_are_refused() -> None:
    data = serialize(deleted([1, 2]), run_optimize=False)
    with pytest.raises(TableError, match=r"decodes to \d+ bytes; expected \d+ \(sizeInBytes"):
        read_deleted_rows(DeletionVector("i", z85_encode(data), None, len(data) + 8, 2), None)


def test_descriptors_are_checked() -> None:
    with pytest.raises(TableFeatureError, match="storage type 'x' is not one of the protocol's") as caught:
        DeletionVector.from_json({**PROTOCOL_UUID, "storageType": "x"})
    assert caught.value.feature == "deletionVectors"
    with pytest.raises(TableError, match="lacks sizeInBytes"):
        DeletionVector.from_json({key: v for key, v in PROTOCOL_UUID.items() if key != "sizeInBytes"})
    with pytest.raises(TableError, match="cardinality '6'; expected a non-negative integer"):
        DeletionVector.from_json({**PROTOCOL_UUID, "cardinality": "6"})
    with pytest.raises(TableError, match="expected at least 20"):
        DeletionVector.from_json({**PROTOCOL_UUID, "pathOrInlineDv": "short"})
    with pytest.raises(MLTError, match="location is None"):
        read_deleted_rows(DeletionVector.from_json(PROTOCOL_UUID), None)


# --- runs -------------------------------------------------------------------------------------


def test_deleted_runs_are_the_runs_of_consecutive_rows() -> None:
    starts, lengths = deleted_runs(deleted([3, 4, 7, 11, 12, 13, 1 << 40]))
    assert starts.tolist() == [3, 7, 11, 1 << 40]
    assert lengths.tolist() == [2, 1, 3, 1]
    assert starts.dtype == np.uint64
    assert lengths.dtype == np.int64
    empty = deleted_runs(deleted([]))
    assert empty[0].size == empty[1].size == 0


@given(st.sets(st.integers(0, 2_000), max_size=300))
def test_deleted_runs_expand_back_to_the_rows(rows: set[int]) -> None:
    starts, lengths = deleted_runs(deleted(sorted(rows)))
    expanded = [int(start) + step for start, length in zip(starts, lengths, strict=True) for step in range(length)]
    assert expanded == sorted(rows)
    assert (starts[1:] > starts[:-1] + lengths[:-1].astype(np.uint64)).all()


def test_deleted_runs_refuse_rows_out_of_order() -> None:
    with pytest.raises(MLTError, match="rows has 3 after 5 at index 2"):
        deleted_runs(np.array([1, 5, 3], dtype=np.uint64))
    with pytest.raises(MLTError, match="negative value -1"):
        deleted_runs(np.array([-1, 2]))
