"""The Dockerfile, without a Docker engine: its rules checked, its install steps and command run in a fresh venv.

The install runs the Dockerfile's own ``pip install`` lines in a new virtualenv
that sees only the files the Dockerfile COPYs (so a forgotten COPY fails here);
the dependencies come from the development venv through a ``.pth`` line, so the
test needs no download but setuptools for the build. Then the image's CMD starts
from that venv and the HEALTHCHECK command must pass against it.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.procs import kill_child, signal_child

DOCKERFILE = ROOT / "Dockerfile"


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined and comments dropped."""
    steps: list[tuple[str, str]] = []
    current = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        current += line
        keyword, _, args = current.partition(" ")
        steps.append((keyword.upper(), args.strip()))
        current = ""
    return steps


def exec_form(args: str) -> list[str]:
    """A JSON exec-form argument list (``["crawler", "daemon"]``), as CMD and HEALTHCHECK CMD use."""
    return json.loads(args[args.index("["):])


@pytest.fixture(scope="module")
def steps() -> list[tuple[str, str]]:
    return instructions(DOCKERFILE.read_text())


class TestDockerfileRules:
    def test_slim_python_base(self, steps):
        """The image starts from a slim official Python image matching requires-python."""
        base = [args for kw, args in steps if kw == "FROM"]
        assert len(base) == 1 and base[0].startswith("python:3.1") and base[0].endswith("-slim")

    def test_runs_as_non_root_with_data_volume(self, steps):
        """The daemon runs as a non-root user, on a declared data volume that is its crawl_dir."""
        users = [args for kw, args in steps if kw == "USER"]
        assert users and users[-1] not in ("root", "0")
        volumes = [json.loads(args) for kw, args in steps if kw == "VOLUME"]
        assert volumes == [["/data"]]
        cmd = exec_form([args for kw, args in steps if kw == "CMD"][-1])
        assert cmd[:2] == ["crawler", "daemon"] and "crawl_dir=/data" in cmd

    def test_healthcheck_uses_python_not_curl(self, steps):
        """HEALTHCHECK asks /status with Python's urllib (slim images have no curl)."""
        checks = [args for kw, args in steps if kw == "HEALTHCHECK"]
        assert len(checks) == 1
        command = exec_form(checks[0].split("CMD", 1)[1])
        assert command[:2] == ["python", "-c"] and "/status" in command[2] and "curl" not in checks[0]

    def test_copied_sources_exist(self, steps):
        """Every COPY source exists in the repository (the build context)."""
        for kw, args in steps:
            if kw == "COPY":
                *sources, _dest = shlex.split(args)
                for source in sources:
                    assert (ROOT / source).exists(), source


async def _wait_for_port(proc: asyncio.subprocess.Process) -> int:
    assert proc.stderr is not None
    async for raw in proc.stderr:
        line = raw.decode(errors="replace")
        if line.startswith("{"):
            event = json.loads(line)
            if event.get("event") == "metrics.listening":
                return int(event["port"])
    raise AssertionError("the daemon exited before it listened")


class TestDockerfileInstall:
    @pytest.mark.timeout(300)
    async def test_install_steps_and_command_work_in_a_fresh_venv(self, tmp_path, steps):
        """The Dockerfile's COPY and pip install steps build a venv whose CMD runs and passes the HEALTHCHECK."""
        root = tmp_path / "image"
        venv = tmp_path / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        python = venv / "bin" / "python"
        purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                 check=True, capture_output=True, text=True).stdout.strip()
        Path(purelib, "dev-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

        workdir = Path("/")
        ran_install = False
        for kw, args in steps:
            if kw == "WORKDIR":
                workdir = workdir / args
            elif kw == "COPY":
                *sources, dest = shlex.split(args)
                target = root / (workdir / dest).relative_to("/")
                for source in sources:
                    path = ROOT / source
                    into = target / path.name if dest.endswith("/") or len(sources) > 1 else target
                    into.parent.mkdir(parents=True, exist_ok=True)
                    if path.is_dir():
                        shutil.copytree(path, into, ignore=shutil.ignore_patterns("__pycache__"))
                    else:
                        shutil.copy(path, into)
            elif kw == "RUN" and args.startswith("pip install"):
                # The image's `pip` is its interpreter's; here the dev venv's pip installs into the fresh venv.
                command = [sys.executable, "-m", "pip", "--python", str(python), *shlex.split(args)[1:]]
                cwd = root / workdir.relative_to("/")
                result = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
                assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
                ran_install = True
        assert ran_install

        cmd = exec_form([args for kw, args in steps if kw == "CMD"][-1])
        args = [a.replace("/etc/", f"{root}/etc/") for a in cmd[1:]]
        data = tmp_path / "data"
        args += ["-D", f"crawl_dir={data}", "-D", f"daemon.seeds={data}/seeds", "-D", "metrics.listen=127.0.0.1:0"]
        env = {**os.environ, "PATH": f"{venv / 'bin'}:{os.environ['PATH']}"}
        proc = await asyncio.create_subprocess_exec(
            str(venv / "bin" / cmd[0]), *args, cwd=tmp_path, env=env,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )
        try:
            port = await asyncio.wait_for(_wait_for_port(proc), 60)
            check = exec_form([args for kw, args in steps if kw == "HEALTHCHECK"][0].split("CMD", 1)[1])
            health = await asyncio.create_subprocess_exec(
                str(python), *[a.replace(":9108", f":{port}") for a in check[1:]])
            assert await asyncio.wait_for(health.wait(), 30) == 0
            signal_child(proc, signal.SIGTERM)
            assert proc.stderr is not None
            await proc.stderr.read()
            assert await asyncio.wait_for(proc.wait(), 30) == 0
        finally:
            if proc.returncode is None:
                kill_child(proc)
                await proc.wait()
