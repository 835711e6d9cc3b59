"""DuckEngine and SparkEngine provide JobEngine: each of its methods, with the same parameters.

No type checker runs on the repo, so this is what keeps ``open_engine``'s return type honest.
"""

from __future__ import annotations

import importlib
import inspect

import pytest

from crawler.jobs.engine import JobEngine

METHODS = [name for name, value in vars(JobEngine).items() if inspect.isfunction(value) and not name.startswith("_")]


def _engine(spec: str) -> type:
    module, name = spec.split(":")
    if module.endswith("spark_engine"):
        pytest.importorskip("pyspark")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("spec", ["crawler.jobs.engine:DuckEngine", "crawler.jobs.spark_engine:SparkEngine"])
@pytest.mark.parametrize("method", METHODS)
def test_engine_has_the_protocol_method(spec: str, method: str) -> None:
    engine = _engine(spec)
    assert inspect.signature(getattr(engine, method)) == inspect.signature(getattr(JobEngine, method))


@pytest.mark.parametrize("spec", ["crawler.jobs.engine:DuckEngine", "crawler.jobs.spark_engine:SparkEngine"])
def test_engine_names_its_errors(spec: str) -> None:
    errors = _engine(spec).errors
    assert errors and all(issubclass(e, BaseException) for e in errors)


def test_the_protocol_has_the_methods_jobs_call() -> None:
    assert METHODS == ["source", "register", "create_table", "stage", "rows", "count_rows", "batches", "write", "close"]
