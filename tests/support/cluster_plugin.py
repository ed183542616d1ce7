"""A pytest plugin with the session's one Spark standalone cluster.

Test modules that need the cluster load it (``pytest_plugins = ("tests.support.cluster_plugin",)``):
a plugin's fixtures are defined once for the whole session, so the suite starts one cluster,
however many modules use it (a fixture imported into each module would be one per module).
Nothing imports this module directly, so pytest can rewrite its asserts.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.cluster import Cluster, running_cluster


@pytest.fixture(scope="session")
def standalone_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The session's standalone cluster (:func:`tests.support.cluster.running_cluster`),
    started when a test first asks for it; always stopped."""
    with running_cluster(tmp_path_factory.mktemp("standalone-cluster")) as cluster:
        yield cluster
