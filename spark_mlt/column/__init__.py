"""PySpark column functions: MLT tokens of id columns, and ids of token columns.

``functions`` holds the public functions, which hand their checked input to one of two
engines behind one interface (``engine``): ``native`` (Spark SQL expressions: ``builders``
over ``lanes`` of arithmetic, for the ``targets`` Column and SQL text) or ``udf`` (vectorised
UDFs, with ``arrow`` running in the workers). ``layouts`` owns the token layouts both engines
read and write (their names, Spark types, packing and vectors), ``inputs`` the sizing and
binding of input columns, ``sql`` the registration for ``spark.sql``, ``sizing`` the codecs
sized from the data, ``versions`` what the running Spark supports.

Example::

    from spark_mlt.column import mlt_decode, mlt_encode
    tokens = df.withColumn("user_tokens", mlt_encode("user_id", codec))
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_mlt._lazy import lazy_attributes

if TYPE_CHECKING:
    from spark_mlt.column.functions import mlt_decode, mlt_encode, mlt_unpack
    from spark_mlt.column.layouts import LAYOUTS, Layout, column_layout, layout_of, token_layouts, token_struct_type
    from spark_mlt.column.sizing import fit_codecs
    from spark_mlt.column.sql import register_mlt_functions

#: The public names, imported on first use: the UDF engine's Python workers import
#: ``spark_mlt.column.arrow``, which must not pull in PySpark's ML modules and SciPy (about
#: 0.4 s of every worker's start).
_LAZY = {
    "mlt_decode": "spark_mlt.column.functions",
    "mlt_encode": "spark_mlt.column.functions",
    "mlt_unpack": "spark_mlt.column.functions",
    "LAYOUTS": "spark_mlt.column.layouts",
    "Layout": "spark_mlt.column.layouts",
    "column_layout": "spark_mlt.column.layouts",
    "layout_of": "spark_mlt.column.layouts",
    "token_layouts": "spark_mlt.column.layouts",
    "token_struct_type": "spark_mlt.column.layouts",
    "fit_codecs": "spark_mlt.column.sizing",
    "register_mlt_functions": "spark_mlt.column.sql",
}


__getattr__ = lazy_attributes(__name__, _LAZY)


__all__ = [
    "LAYOUTS",
    "Layout",
    "column_layout",
    "fit_codecs",
    "layout_of",
    "mlt_decode",
    "mlt_encode",
    "mlt_unpack",
    "register_mlt_functions",
    "token_layouts",
    "token_struct_type",
]
