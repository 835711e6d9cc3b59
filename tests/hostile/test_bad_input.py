"""Bad input never crashes: fuzzed config files, -D overrides and seed files give clear errors, never tracebacks.

Config: load_config either returns a config or raises ConfigError with one line
naming the key (exit 2 through the CLI). Seeds: every line that is not kept is
reported with its file and line number; nothing is dropped silently.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import structlog
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawler.config import CrawlerConfig, load_config
from crawler.errors import ConfigError
from crawler.jobs.inject import read_seeds
from crawler.urls.filters import UrlFilters
from crawler.urls.normalize import InvalidUrl, normalize
from tests.conftest import ROOT, run_crawler


def _leaves(tree: dict, prefix: str = "") -> list[str]:
    keys = []
    for name, value in tree.items():
        path = f"{prefix}{name}"
        keys += _leaves(value, path + ".") if isinstance(value, dict) and name != "plugins" else [path]
    return keys


KEYS = _leaves(CrawlerConfig().model_dump())
SECTIONS = sorted({k.rsplit(".", 1)[0] for k in KEYS if "." in k})
WRONG = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
    st.lists(st.integers(-5, 5), max_size=3), st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _default(key: str) -> object:
    node: object = CrawlerConfig().model_dump()
    for part in key.split("."):
        node = node[part]  # type: ignore[index]
    return node


def _nest(key: str, value: object) -> dict:
    tree: dict = {}
    node = tree
    *parents, leaf = key.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value
    return tree


def _no_nan(value: object) -> bool:
    if isinstance(value, dict):
        return all(_no_nan(v) for v in value.values())
    if isinstance(value, list):
        return all(_no_nan(v) for v in value)
    return not (isinstance(value, float) and not math.isfinite(value))


def _assert_clear(exc: ConfigError, key: str) -> None:
    message = str(exc)
    assert "\n" not in message and message.startswith("config error")
    assert key.split(".")[0] in message, message


class TestConfigFuzz:
    @FUZZ
    @given(key=st.sampled_from(KEYS), value=WRONG)
    def test_wrong_values_in_a_file(self, tmp_path, key, value):
        """Any value of any type under any key loads, or fails with one line naming the key; never a traceback."""
        path = tmp_path / "fuzz.yaml"
        path.write_text(yaml.safe_dump(_nest(key, value)))
        try:
            cfg = load_config(path)
        except ConfigError as exc:
            _assert_clear(exc, key)
        else:
            assert _no_nan(cfg.model_dump())

    @FUZZ
    @given(key=st.sampled_from(KEYS), raw=st.text(max_size=40))
    def test_any_text_through_minus_d(self, key, raw):
        """-D key=<any text> loads or fails with one line naming the key."""
        try:
            load_config(None, [f"{key}={raw}"])
        except ConfigError as exc:
            _assert_clear(exc, key)

    @FUZZ
    @given(section=st.sampled_from(["", *SECTIONS]), name=st.from_regex(r"[a-z_]{1,12}", fullmatch=True))
    def test_unknown_keys_are_named(self, tmp_path, section, name):
        """A key the config does not have is rejected, naming its full dotted path."""
        key = f"{section}.{name}" if section else name
        if key in KEYS or any(k.startswith(key + ".") for k in KEYS):
            return
        path = tmp_path / "fuzz.yaml"
        path.write_text(yaml.safe_dump(_nest(key, 1)))
        with pytest.raises(ConfigError, match=f"unknown key {key}$"):
            load_config(path)

    @pytest.mark.parametrize("key", [k for k in KEYS if isinstance(_default(k), int | float)
                                     and not isinstance(_default(k), bool)])
    def test_negative_limits_are_rejected(self, key):
        """A negative number for any numeric limit is refused, naming the key."""
        with pytest.raises(ConfigError) as info:
            load_config(None, [f"{key}=-1"])
        _assert_clear(info.value, key)
        assert key in str(info.value)

    @FUZZ
    @given(data=st.binary(max_size=300))
    def test_binary_config_file(self, tmp_path, data):
        """A config file of arbitrary bytes loads (when it happens to be valid) or fails with one line."""
        path = tmp_path / "fuzz.yaml"
        path.write_bytes(data)
        try:
            load_config(path)
        except ConfigError as exc:
            assert "\n" not in str(exc) and str(path) in str(exc)


CLI_CASES = [
    (["-D", "fetcher.concurrency=-5"], "fetcher.concurrency"),
    (["-D", "http.timeout.total=.nan"], "http.timeout.total"),
    (["-D", "generate.top_n=yes"], "generate.top_n"),
    (["-D", "fetcher.colour=blue"], "unknown key fetcher.colour"),
    (["-D", "http.private_allowlist=[not-a-network]"], "http.private_allowlist"),
    (["-D", "fetcher.min_delay=" + "9" * 5000], "fetcher.min_delay"),
]


class TestConfigThroughTheCli:
    @pytest.mark.parametrize(("args", "needle"), CLI_CASES)
    async def test_bad_config_exits_2_with_one_line(self, tmp_path, args, needle):
        """A bad -D value stops the command with exit 2 and one line on stderr naming the key."""
        result = await run_crawler("readdb", "--stats", "-D", f"crawl_dir={tmp_path}", *args, cwd=ROOT)
        assert result.code == 2
        assert result.stderr.count("\n") == 1 and needle in result.stderr and "Traceback" not in result.stderr

    async def test_binary_config_file_exits_2(self, tmp_path):
        """A config file of binary junk is named in a one-line error, exit 2."""
        path = tmp_path / "junk.yaml"
        path.write_bytes(bytes(range(256)) * 4)
        result = await run_crawler("readdb", "--stats", "-c", str(path), cwd=ROOT)
        assert result.code == 2 and result.stderr.count("\n") == 1 and str(path) in result.stderr


ODD_URLS = [
    "http://", "http://[::1", "http://exa mple.com/", "javascript:alert(1)", "HTTP://EXAMPLE.COM:99999/",
    "http://a/\x00b", "//no-scheme.example/", "http://user:pass@host.example/", "http://256.256.256.256/",
    "ftp://files.example/", "http://例え.テスト/", "http://host.example/%zz", "\ufeffhttp://bom.example/",
    "http://host.example/" + "a" * 5000, "   http://spaces.example/   ", "http://host.example#frag",
    "mailto:a@b.example", "file:///etc/passwd", "data:text/html,hi", "http://[::ffff:10.0.0.1]/",
    "http://xn--/", "http:\\\\backslash.example\\", "http://host.example:0/", "\x7fhttp://del.example/",
    "http://" + "sub." * 100 + "example/", "h\u200bttp://zero-width.example/", "http://\U0001F600.example/",
]


def _candidates(path: Path) -> dict[int, str]:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return {n: line.strip() for n, line in enumerate(fh, start=1) if line.strip() and not line.strip().startswith("#")}


def _assert_accounted(path: Path, seeds: dict[str, str], logs: list[dict]) -> None:
    """Every candidate line is either kept (its normalized URL) or logged with this file and its line number."""
    logged = {e["line"] for e in logs if e.get("file") == str(path)}
    for number, line in _candidates(path).items():
        if number in logged:
            continue
        try:
            assert normalize(line) in seeds, (number, line[:80])
        except InvalidUrl:
            pytest.fail(f"line {number} ({line[:80]!r}) neither kept nor reported")


class TestSeedFuzz:
    def test_every_url_oddity_is_kept_or_reported_by_line(self, tmp_path):
        """Each odd seed line is kept or reported with file and line number; nothing raises."""
        path = tmp_path / "seeds.txt"
        path.write_text("\n".join(ODD_URLS) + "\n", encoding="utf-8")
        with structlog.testing.capture_logs() as logs:
            seeds, rejected, filtered = read_seeds(path, structlog.get_logger(), UrlFilters(CrawlerConfig().urls))
        _assert_accounted(path, seeds, logs)
        assert rejected + filtered > 10 and "file:///etc/passwd" not in seeds

    @settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(data=st.binary(max_size=2000))
    def test_binary_seed_files(self, tmp_path, data):
        """A seed file of arbitrary bytes never raises; every line is kept or reported with its number."""
        path = tmp_path / "seeds.bin"
        path.write_bytes(data)
        with structlog.testing.capture_logs() as logs:
            seeds, _, _ = read_seeds(path, structlog.get_logger(), UrlFilters(CrawlerConfig().urls))
        _assert_accounted(path, seeds, logs)

    async def test_inject_reports_bad_lines_and_keeps_the_rest(self, tmp_path):
        """crawler inject on binary junk, a 1 MB line and odd URLs exits 0, warns by file and line, and
        injects the good line; no log line carries the whole overlong URL."""
        path = tmp_path / "seeds.txt"
        path.write_bytes(b"\x00\xff\xfe garbage\n" + b"http://long.example/" + b"x" * 1_000_000 + b"\n"
                         + "\n".join(ODD_URLS[:8]).encode() + b"\nhttp://good.example/\n")
        result = await run_crawler("inject", str(path), "-D", f"crawl_dir={tmp_path}", "-D", "log.format=json",
                                   cwd=ROOT)
        assert result.code == 0, result.stderr[-500:]
        events = result.events()
        reported = {e["line"] for e in events if e.get("file") == str(path)}
        assert {1, 2} <= reported
        assert max(len(line) for line in result.stderr.splitlines()) < 10_000
        done = [e for e in events if e["event"] == "inject.done"]
        assert done and done[0]["injected"] >= 1
