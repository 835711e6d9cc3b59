"""The driver's AWS credentials, carried in a Spark task so that worker machines need no AWS configuration.

Resolved once on the driver by boto3's usual chain (environment, profile,
instance role) and frozen; an executor builds its ``Bucket`` with them. Without
any on the driver, executors fall back to their own chain (an instance profile
on cluster nodes).
"""

from __future__ import annotations

from dataclasses import dataclass

from crawler.config import StorageConfig


@dataclass(frozen=True, slots=True)
class Credentials:
    access_key: str
    secret_key: str
    token: str = ""

    def __repr__(self) -> str:  # a task or log line that prints one must not leak the secret
        return f"Credentials(access_key={self.access_key!r}, secret_key=***)"


def driver_credentials(cfg: StorageConfig) -> Credentials | None:
    import boto3

    from crawler.storage.bucket import region

    found = boto3.Session(region_name=region(cfg)).get_credentials()
    if found is None:
        return None
    frozen = found.get_frozen_credentials()
    return Credentials(frozen.access_key, frozen.secret_key, frozen.token or "")
