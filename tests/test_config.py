"""Config: units, defaults, overrides, and errors that name the key."""

from __future__ import annotations

import pytest
import yaml

from crawler.config import CrawlerConfig, load_config
from crawler.errors import ConfigError
from crawler.units import parse_duration, parse_size
from tests.conftest import ROOT


class TestUnits:
    @pytest.mark.parametrize(
        ("text", "seconds"),
        [(5, 5.0), (0.5, 0.5), ("500ms", 0.5), ("30s", 30.0), ("2m", 120.0), ("1h", 3600.0), ("30d", 2592000.0),
         ("1.5h", 5400.0), ("10", 10.0)],
    )
    def test_durations(self, text, seconds):
        """Durations are seconds, or a number with ms/s/m/h/d."""
        assert parse_duration(text) == seconds

    @pytest.mark.parametrize(
        ("text", "size"),
        [(1024, 1024), ("10kB", 10_000), ("10MB", 10_000_000), ("10KiB", 10_240), ("10MiB", 10 * 1024**2),
         ("1GiB", 1024**3), ("512", 512)],
    )
    def test_sizes(self, text, size):
        """Sizes: kB/MB are powers of 1000, KiB/MiB powers of 1024."""
        assert parse_size(text) == size

    @pytest.mark.parametrize("bad", ["fast", "10 parsecs", "-1s", True, "", None])
    def test_bad_durations_are_rejected(self, bad):
        """Anything else is a ValueError naming the accepted forms."""
        with pytest.raises(ValueError, match="duration|negative"):
            parse_duration(bad)


class TestLoad:
    def test_shipped_config_yaml_is_exactly_the_defaults(self):
        """config.yaml documents every key with its default: loading it changes nothing."""
        assert load_config(ROOT / "config.yaml") == CrawlerConfig()

    def test_overrides_are_yaml_scalars(self):
        """-D values are read as YAML scalars and coerced to the field's type."""
        cfg = load_config(None, ["fetcher.parse=false", "fetcher.min_delay=250ms", "http.content_limit=1MiB",
                                 "http.resolve={a.test: 127.0.0.2}"])
        assert cfg.fetcher.parse is False
        assert cfg.fetcher.min_delay == 0.25
        assert cfg.http.content_limit == 1024 * 1024
        assert cfg.http.resolve == {"a.test": "127.0.0.2"}

    @pytest.mark.parametrize(
        ("yaml_text", "needle"),
        [
            ("fetcher:\n  concurency: 5\n", "unknown key fetcher.concurency"),
            ("fetcher:\n  concurrency: lots\n", "fetcher.concurrency = 'lots'"),
            ("db:\n  fetch_interval: 3 weeks\n", "db.fetch_interval = '3 weeks': expected a duration"),
            ("http:\n  content_limit: huge\n", "http.content_limit = 'huge': expected a size"),
            ("fetcher:\n  queue_mode: planet\n", "fetcher.queue_mode = 'planet'"),
            ("fetcher: [1, 2\n", "not valid YAML"),
            ("sitemap:\n  max_urls: 60000\n", "sitemap.max_urls = 60000"),
            ("db:\n  max_outlinks: -1\n", "db.max_outlinks = -1"),
        ],
    )
    def test_errors_name_the_key_and_value(self, tmp_path, yaml_text, needle):
        """A bad config file stops with one line naming the key path, the value and what is expected."""
        path = tmp_path / "config.yaml"
        path.write_text(yaml_text)
        with pytest.raises(ConfigError) as info:
            load_config(path)
        assert needle in str(info.value)
        assert str(path) in str(info.value)
        assert "\n" not in str(info.value)

    @pytest.mark.parametrize(
        ("yaml_text", "after_path"),
        [
            # libyaml takes this tab; the pure-Python parser, which decides, does not.
            ("fetcher:\n  concurrency:\t5\n", " line 2: not valid YAML (ScannerError)"),
            ("fetcher:\n  concurrency: 5\n bad: 1\n", " line 3: not valid YAML (ParserError)"),
            ("fetcher: [1, 2\n", " line 2: not valid YAML (ParserError)"),
            ("fetcher:\n  agent: \x01\n", ": not valid YAML (ReaderError)"),
        ],
    )
    def test_yaml_errors_are_the_pure_parsers(self, tmp_path, yaml_text, after_path):
        """config.yaml is parsed by libyaml when both parsers take it; what libyaml refuses, and a text with a
        tab (which libyaml may take), go to the pure-Python parser, whose error and line users see."""
        path = tmp_path / "config.yaml"
        path.write_text(yaml_text)
        with pytest.raises(ConfigError) as info:
            load_config(path)
        assert str(info.value) == f"config error: {path}{after_path}"

    def test_yaml_values_are_the_pure_parsers(self):
        """libyaml builds the pure-Python parser's values from the shipped config.yaml, and from anchors,
        merge keys, quoting and the scalar types besides."""
        if not hasattr(yaml, "CSafeLoader"):
            pytest.skip("PyYAML built without libyaml: the pure-Python parser reads everything")
        shipped = (ROOT / "config.yaml").read_text()
        extra = "extra:\n  a: &x {b: 'c''d', e: [1, 2.5, null, yes, 0x1f, 2026-12-05]}\n  f:\n    <<: *x\n    g: ~\n"
        for text in (shipped, shipped + extra):
            assert yaml.load(text, Loader=yaml.CSafeLoader) == yaml.safe_load(text)

    def test_missing_explicit_file_is_an_error(self, tmp_path):
        """-c naming a file that does not exist is an error, not silently the defaults."""
        with pytest.raises(ConfigError, match="no such file"):
            load_config(tmp_path / "nope.yaml")
