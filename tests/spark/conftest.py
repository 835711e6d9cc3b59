"""One local Spark (local[2], loopback only) for the whole test session: starting a JVM takes seconds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

# Starting the JVM and its Python workers takes seconds, far more on a loaded machine.
pytestmark = pytest.mark.timeout(300)

from crawler.config import CrawlerConfig  # noqa: E402
from crawler.jobs.spark_engine import spark_session  # noqa: E402
from tests.jobs.conftest import cfg, make_segment  # noqa: E402, F401 - fixtures: segments written with the real schemas

# The test JVM lives a minute on tiny inputs: compiling hot code with C1 only, and the serial
# collector, leave the 2 cores to the work (the cold first job took ~40% less time this way).
TEST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def spark_cfg(crawl_dir: Path, **sections: dict[str, Any]) -> CrawlerConfig:
    """A config whose jobs run on the session's local Spark."""
    return CrawlerConfig.model_validate(
        {
            "crawl_dir": str(crawl_dir),
            "jobs": {"engine": "spark"},
            "spark": {"master": "local[2]", "conf": {"spark.driver.extraJavaOptions": TEST_JVM}},
            **sections,
        }
    )


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    session = spark_session(spark_cfg(Path(".")))
    yield session
    session.stop()
