"""PySpark column functions: MLT tokens of id columns, and ids of token columns.

Read top-down:

* ``functions``: the public functions; they check their options once and hand their input
  to an engine;
* ``engine``: the one interface every engine implements, and the policy that picks one;
* ``native`` (SQL expressions built by ``builders`` over the lane arithmetic of ``lanes``)
  and ``udf`` (vectorised UDFs; ``arrow`` runs in the Python workers): the two engines;
* ``sqltext``: the one expression form both write, SQL text;
* ``layouts``: one object per token layout, which every layer asks;
* ``inputs``: an input by name, or bound once to a lambda;
* ``sql``: registration for ``spark.sql``; ``sizing``: codecs sized from the data;
  ``versions``: what the running PySpark supports.

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
