"""Where a table lives: one location and its storage options, seen by delta-rs, pyarrow and Spark.

A table location is a plain path (``/data/ratings_mlt``) or a URI (``file:///data/ratings_mlt``,
``s3://bucket/ratings_mlt`` or ``s3a://bucket/ratings_mlt``,
``abfss://container@account.dfs.core.windows.net/ratings_mlt``, ``gs://bucket/ratings_mlt``).
A user names it once; each of the three libraries that touch it gets its own form:

* delta-rs (``deltalake``, the commits and the log) gets the location as given (it reads ``s3://``
  and ``s3a://`` alike) and the [`StorageOptions`][spark_mlt.delta.fs.StorageOptions]; what they
  leave out it takes from the environment (``AWS_*``, ``AZURE_STORAGE_*``, ``GOOGLE_*``).
* Spark (the Parquet files) gets a plain path made absolute (its JVM does not follow Python's
  ``os.chdir``), a ``file:`` URI unchanged, and ``s3://`` as ``s3a://``: Hadoop's S3
  connector (``hadoop-aws``, on EMR and Databricks too) is ``s3a``; plain Apache Hadoop has no
  ``s3://`` filesystem. Spark's own settings (``spark.hadoop.fs.s3a.*``) configure it:
  [`s3a_conf`][spark_mlt.delta.fs.s3a_conf] derives them from the same storage options where a user wants that.
* the driver's own file work (listing the files Spark committed, reading their Parquet
  footers, removing a staging folder, vacuum's cleanup) goes through ``pyarrow.fs``, never
  ``os`` or ``shutil``: an S3 location gets a ``pyarrow.fs.S3FileSystem`` configured from the
  storage options (endpoint, region, keys; the environment for what they leave out), other
  URIs ``FileSystem.from_uri`` (credentials from the environment).

Secrets stay out of sight: [`StorageOptions`][spark_mlt.delta.fs.StorageOptions] shows the values
of secret keys (any key naming a secret, key, token, password, signature or credential) as ``***``
in its ``repr``, and [`redact`][spark_mlt.delta.fs.redact] scrubs them from a message, so an error
or a log line that mentions the options never prints a secret. Nothing here writes options to a
table's properties or commits.

Object stores have no real folders: an "empty folder" may not exist at all, and folders carry
no modification time, so callers treat a missing folder as empty and fall back to the files'
times.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

import pyarrow.fs as pafs

from spark_mlt.errors import MLTTypeError

__all__ = ["Location", "StorageOptions", "locate", "redact", "s3a_conf", "spark_uri", "storage_options_of"]

#: Keys whose values are secrets: never shown in a repr, a message or a log line.
SECRET_KEY = re.compile(r"secret|key|token|password|passphrase|signature|credential|sas", re.IGNORECASE)
_HIDDEN = "***"
_S3_SCHEMES = ("s3", "s3a")


class StorageOptions(Mapping[str, str]):
    """Settings of a table's store, with delta-rs' keys (``AWS_ENDPOINT_URL``, ``AWS_REGION``,
    ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``,
    ``AWS_ALLOW_HTTP``, ...). delta-rs takes them as they are; pyarrow's S3 filesystem and
    Spark's ``s3a`` settings are derived from the S3 ones (keys are matched without regard to
    case). Its ``repr`` hides secret values.

    Example::

        options = StorageOptions({"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_REGION": "us-east-1"})
        write_delta(tokens, "s3://bucket/ratings_mlt", codecs, storage_options=options)
    """

    __slots__ = ("_items",)

    def __init__(self, options: Mapping[str, str] | None = None) -> None:
        if options is not None and not isinstance(options, Mapping):
            raise MLTTypeError(
                f"storage_options must be a mapping of option names to values; got {type(options).__name__}",
                parameter="storage_options",
            )
        items = {str(key): str(value) for key, value in (options or {}).items()}
        self._items: dict[str, str] = items

    def __getitem__(self, key: str) -> str:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self._items) == dict(other)

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._items.items())))

    def __repr__(self) -> str:
        shown = {key: _HIDDEN if SECRET_KEY.search(key) else value for key, value in self._items.items()}
        return f"StorageOptions({shown!r})"

    def lookup(self, *keys: str) -> str | None:
        """The value of the first of ``keys`` (any case) that is set here, else in the
        environment (exact name); None when neither has one."""
        lowered = {key.lower(): value for key, value in self._items.items()}
        for key in keys:
            if key.lower() in lowered:
                return lowered[key.lower()]
        for key in keys:
            if os.environ.get(key):
                return os.environ[key]
        return None

    def secrets(self) -> list[str]:
        """The secret values (of keys naming a secret), longest first."""
        values = {value for key, value in self._items.items() if SECRET_KEY.search(key) and value}
        return sorted(values, key=len, reverse=True)


def storage_options_of(options: Mapping[str, str] | None) -> StorageOptions:
    """``options`` as [`StorageOptions`][spark_mlt.delta.fs.StorageOptions] (itself when it is one already)."""
    return options if isinstance(options, StorageOptions) else StorageOptions(options)


#: Environment variables that configure stores for delta-rs, pyarrow and Spark's s3a.
_STORE_ENVIRONMENT = ("AWS_", "AZURE_", "GOOGLE_", "GCS_")


def redact(text: str, options: Mapping[str, str] | None = None) -> str:
    """``text`` with every secret value replaced by ``***``: those of ``options`` (see
    [`StorageOptions`][spark_mlt.delta.fs.StorageOptions]) and those of the store settings in the
    environment (``AWS_*``, ``AZURE_*``, ``GOOGLE_*``, ``GCS_*`` variables whose names name a
    secret).

    Example::

        redact(str(error), storage_options)
    """
    environment = {key: value for key, value in os.environ.items() if key.startswith(_STORE_ENVIRONMENT)}
    secrets = {*storage_options_of(options).secrets(), *StorageOptions(environment).secrets()}
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, _HIDDEN)
    return text


def _truthy(value: str | None) -> bool:
    return value is not None and value.strip().lower() in ("1", "true", "yes", "on")


def _s3_endpoint(options: StorageOptions) -> tuple[str | None, bool]:
    """The S3 endpoint URL (None: AWS's own) and whether it is plain HTTP."""
    endpoint = options.lookup("AWS_ENDPOINT_URL", "AWS_ENDPOINT", "AWS_ENDPOINT_URL_S3")
    return endpoint, bool(endpoint and endpoint.lower().startswith("http://"))


def s3a_conf(storage_options: Mapping[str, str] | None, *, prefix: str = "spark.hadoop.") -> dict[str, str]:
    """Spark's ``s3a`` settings for the S3 storage options: endpoint, region, path-style
    access and plain HTTP for a custom endpoint, and the keys (with the matching credentials
    provider) when the options hold them. For a session builder, ``spark-submit --conf`` or a
    properties file; ``prefix=""`` gives the Hadoop keys themselves.

    Example::

        spark = local_session("job", extra_conf=s3a_conf({"AWS_ENDPOINT_URL": "http://127.0.0.1:9000"}))
    """
    options = storage_options_of(storage_options)
    conf: dict[str, str] = {}
    endpoint, plain_http = _s3_endpoint(options)
    if endpoint:
        conf["fs.s3a.endpoint"] = endpoint
        if not _truthy(options.lookup("AWS_VIRTUAL_HOSTED_STYLE_REQUEST")):
            conf["fs.s3a.path.style.access"] = "true"
        if plain_http:
            conf["fs.s3a.connection.ssl.enabled"] = "false"
    region = options.lookup("AWS_REGION", "AWS_DEFAULT_REGION")
    if region:
        conf["fs.s3a.endpoint.region"] = region
    key, secret = options.lookup("AWS_ACCESS_KEY_ID"), options.lookup("AWS_SECRET_ACCESS_KEY")
    token = options.lookup("AWS_SESSION_TOKEN")
    if key and secret:
        conf["fs.s3a.access.key"], conf["fs.s3a.secret.key"] = key, secret
        if token:
            conf["fs.s3a.session.token"] = token
            conf["fs.s3a.aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
        else:
            conf["fs.s3a.aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
    return {prefix + name: value for name, value in conf.items()}


def _s3_filesystem(options: StorageOptions) -> pafs.S3FileSystem:
    """pyarrow's S3 filesystem for the storage options (the environment fills the gaps)."""
    endpoint = _s3_endpoint(options)[0]
    kwargs: dict[str, object] = {}
    key, secret = options.lookup("AWS_ACCESS_KEY_ID"), options.lookup("AWS_SECRET_ACCESS_KEY")
    if key and secret:
        kwargs.update(access_key=key, secret_key=secret, session_token=options.lookup("AWS_SESSION_TOKEN"))
    region = options.lookup("AWS_REGION", "AWS_DEFAULT_REGION")
    if region:
        kwargs["region"] = region
    if endpoint:
        parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        kwargs.update(endpoint_override=parts.netloc + parts.path.rstrip("/"), scheme=parts.scheme or "https")
    if _truthy(options.lookup("AWS_VIRTUAL_HOSTED_STYLE_REQUEST")):
        kwargs["force_virtual_addressing"] = True
    return pafs.S3FileSystem(**kwargs)


@dataclass(frozen=True)
class Location:
    """A table's location.

    Attributes:
        uri: the location as the caller gave it; what delta-rs is given.
        filesystem: the pyarrow filesystem that holds the table.
        root: the table folder's path inside ``filesystem``, without a trailing slash.
        storage_options: the store's settings for delta-rs (and pyarrow's S3 filesystem).
    """

    uri: str
    filesystem: pafs.FileSystem
    root: str
    storage_options: StorageOptions = field(default_factory=StorageOptions)

    @property
    def scheme(self) -> str:
        """The URI's scheme in lower case (``s3``, ``s3a``, ``file``, ...); ``""`` for a plain path."""
        return self.uri.split("://", 1)[0].lower() if "://" in self.uri else ""

    @property
    def delta_options(self) -> dict[str, str] | None:
        """The storage options as delta-rs takes them (None when there are none)."""
        return dict(self.storage_options) or None

    def path(self, relative: str) -> str:
        """The ``filesystem`` path of ``relative`` (``/``-separated, relative to the table)."""
        return f"{self.root}/{relative}" if relative else self.root

    def absolute_path(self, uri: str) -> str | None:
        """The ``filesystem`` path of a file a log action names by an absolute URI or path (as
        the log writes it, percent-encoded), or None when it is outside the table's own store: a
        local path (``file:`` or plain) for a local table, ``s3://``/``s3a://`` for an S3 table,
        else a file under the table's URI.

        Example::

            locate("s3://bucket/t").absolute_path("s3a://bucket/t/x%20y.parquet")  # "bucket/t/x y.parquet"
        """
        parts = urlsplit(uri)
        scheme = parts.scheme.lower()
        local = isinstance(self.filesystem, pafs.LocalFileSystem)
        if local and scheme in ("", "file") and parts.netloc in ("", "localhost") and parts.path.startswith("/"):
            return unquote(parts.path)
        if self.scheme in ("s3", "s3a") and scheme in ("s3", "s3a") and parts.netloc:
            return parts.netloc + unquote(parts.path)
        table = unquote(self.uri).rstrip("/") + "/"
        decoded = unquote(uri)
        if "://" in table and decoded.startswith(table):
            return self.path(decoded[len(table) :])
        return None

    def data_path(self, path: str) -> str | None:
        """The ``filesystem`` path of a file an action names (relative to the table, or absolute
        in the table's own store: see `absolute_path`), or None where it is in another store.

        Example::

            locate("/lake/t").data_path("part-0.parquet")  # "/lake/t/part-0.parquet"
        """
        if "://" not in path and not path.startswith("/"):
            return self.path(path)
        return self.absolute_path(path)

    def relative(self, path: str) -> str:
        """``path`` (a ``filesystem`` path under the table) relative to the table, ``/``-separated."""
        return path[len(self.root) :].lstrip("/")

    def spark_path(self, relative: str = "") -> str:
        """What Spark is given for ``relative`` (see [`spark_uri`][spark_mlt.delta.fs.spark_uri])."""
        base = spark_uri(self.uri) if "://" in self.uri else self.root
        if not relative:
            return base
        return f"{base.rstrip('/')}/{relative}" if "://" in base else os.path.join(base, *relative.split("/"))

    def exists(self, relative: str) -> bool:
        """Whether a file or folder ``relative`` to the table exists."""
        return bool(self.filesystem.get_file_info(self.path(relative)).type != pafs.FileType.NotFound)

    def files(self, relative: str = "") -> list[pafs.FileInfo]:
        """Every file under ``relative`` (recursively), sorted by path; none if it does not exist."""
        selector = pafs.FileSelector(self.path(relative), recursive=True, allow_not_found=True)
        found = self.filesystem.get_file_info(selector)
        return sorted((info for info in found if info.type == pafs.FileType.File), key=lambda info: info.path)

    def folders(self) -> list[pafs.FileInfo]:
        """The table folder's direct subfolders."""
        selector = pafs.FileSelector(self.root, recursive=False, allow_not_found=True)
        return [info for info in self.filesystem.get_file_info(selector) if info.type == pafs.FileType.Directory]

    def remove_folder(self, relative: str) -> None:
        """Removes the folder ``relative`` and everything in it; nothing if it does not exist."""
        with contextlib.suppress(FileNotFoundError):
            self.filesystem.delete_dir(self.path(relative))

    def remove_file(self, path: str) -> None:
        """Removes the file at the ``filesystem`` path ``path``."""
        self.filesystem.delete_file(path)


def spark_uri(path: str | os.PathLike[str]) -> str:
    """What Spark is given for a location: an absolute path for a plain path (Spark's JVM keeps
    the working directory it started in, which Python may since have left), ``s3a://`` for
    ``s3://`` and ``s3a://`` URIs, any other URI as given.

    Example::

        spark_uri("s3://bucket/ratings_mlt")  # "s3a://bucket/ratings_mlt"
    """
    uri = os.fspath(path)
    if "://" not in uri:
        return os.path.abspath(uri)
    scheme, rest = uri.split("://", 1)
    return f"s3a://{rest}".rstrip("/") if scheme.lower() in _S3_SCHEMES else uri.rstrip("/")


def locate(path: str | os.PathLike[str], storage_options: Mapping[str, str] | None = None) -> Location:
    """The [`Location`][spark_mlt.delta.fs.Location] of a plain path or a URI, with the store's options.

    Example::

        locate("file:///data/ratings_mlt").root  # "/data/ratings_mlt"
        locate("s3a://bucket/ratings_mlt", {"AWS_REGION": "eu-west-1"}).spark_path()  # "s3a://bucket/ratings_mlt"
    """
    uri = os.fspath(path)
    options = storage_options_of(storage_options)
    if "://" in uri and uri.split("://", 1)[0].lower() in _S3_SCHEMES:
        filesystem: pafs.FileSystem = _s3_filesystem(options)
        root = uri.split("://", 1)[1]
    elif "://" in uri:
        filesystem, root = pafs.FileSystem.from_uri(uri)
    else:  # pyarrow's local filesystem wants absolute paths; Spark and delta-rs keep the one given
        filesystem, root = pafs.LocalFileSystem(), os.path.abspath(uri)
    return Location(uri=uri, filesystem=filesystem, root=root.rstrip("/") or "/", storage_options=options)
