"""Generate the benchmark web: many hosts of realistic pages, deterministic from a seed.

Each host is a folder named by its loopback address (``127.0.1.N``), served by
one nginx that picks the folder by the Host header. Pages are ~30 KB median
(log-normal), with 10-80 links: mostly within the host, some to other hosts,
a few into a robots-disallowed folder, to a redirect, or to a missing page.
Every file is also stored pre-gzipped, so nginx serves compressed bodies (as
real sites do) without spending CPU on compression during the run.
"""

from __future__ import annotations

import argparse
import gzip
import math
import random
import shutil
from pathlib import Path

WORDS = ["weather", "station", "rain", "gauge", "anemometer", "barometer", "calibration", "sensor", "wind", "pressure", "humidity", "temperature", "data", "logger", "export", "network", "volunteer", "school", "harbour", "ridge", "storm", "lightning", "brass", "copper", "housing", "bearing", "cup", "vane", "mast", "solar", "battery", "firmware", "reading", "archive", "forecast", "cloud", "frost", "dew", "point", "season", "record", "maintenance", "kit", "spare", "part", "manual", "guide", "review", "report", "notes"]


def host_name(index: int) -> str:
    return f"127.0.1.{index + 1}"


def _paragraph(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def _page(rng: random.Random, host: str, hosts: list[str], page: int, pages: int, port: int) -> str:
    size = int(min(max(rng.lognormvariate(math.log(30_000), 0.45), 6_000), 150_000))
    links = []
    for _ in range(rng.randint(10, 80)):
        roll = rng.random()
        if roll < 0.80:
            links.append(f"/p/{rng.randrange(pages)}.html")
        elif roll < 0.90:
            other = rng.choice(hosts)
            links.append(f"http://{other}:{port}/p/{rng.randrange(pages)}.html")
        elif roll < 0.94:
            links.append(f"/private/{rng.randrange(5)}.html")
        elif roll < 0.97:
            links.append(f"/moved/{rng.randrange(pages)}.html")
        else:
            links.append(f"/missing/{rng.randrange(1000)}.html")
    # Each page links to its successor, so every page of a host is reachable from its root.
    links.append(f"/p/{(page + 1) % pages}.html")
    body, anchors, length = [], iter(links), 0
    while length < size:
        para = _paragraph(rng, rng.randint(40, 120))
        link = next(anchors, None)
        if link is not None:
            para += f' See <a href="{link}">{rng.choice(WORDS)} {rng.choice(WORDS)}</a>.'
        body.append(f"<p>{para}</p>")
        length += len(para) + 7
    body.extend(f'<a href="{link}">{rng.choice(WORDS)}</a>' for link in anchors)
    return (
        f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{host} page {page}: "
        f"{rng.choice(WORDS)} {rng.choice(WORDS)}</title><style>p{{margin:1em}}</style></head><body>"
        f"<nav><a href=\"/\">home</a></nav><h1>{rng.choice(WORDS)}</h1>{''.join(body)}"
        "<script>var x = 1;</script></body></html>\n"
    )


def _write(path: Path, text: str) -> None:
    data = text.encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.with_name(path.name + ".gz").write_bytes(gzip.compress(data, 6))


def generate(out: Path, hosts: int, pages: int, port: int, seed: int) -> list[str]:
    """Write the web under ``out``; returns the seed URLs (each host's root)."""
    if out.exists():
        shutil.rmtree(out)
    rng = random.Random(seed)
    names = [host_name(i) for i in range(hosts)]
    for host in names:
        root = out / host
        _write(root / "robots.txt", "User-agent: *\nDisallow: /private/\n")
        index = "".join(f'<li><a href="/p/{i}.html">page {i}</a></li>' for i in range(0, pages, max(1, pages // 20)))
        _write(root / "index.html", f"<!DOCTYPE html><html><head><title>{host}</title></head>"
                                    f"<body><ul>{index}</ul></body></html>\n")
        for page in range(pages):
            _write(root / "p" / f"{page}.html", _page(rng, host, names, page, pages, port))
        for i in range(5):
            _write(root / "private" / f"{i}.html", "<html><title>private</title></html>\n")
    return [f"http://{h}:{port}/" for h in names]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("--hosts", type=int, default=120)
    parser.add_argument("--pages", type=int, default=50)
    parser.add_argument("--port", type=int, default=18080)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    for url in generate(args.out, args.hosts, args.pages, args.port, args.seed):
        print(url)
