"""What a compiled HTML parse pass would buy a crawl, measured with a stand-in for one (issue 19).

Most of a parse process's time is Python calling into lexbor element by element: the walk over the
elements, the outlinks and their anchors, the text (docs/benchmarks.md). Moving that into compiled code
is the one change of its size left, and this project has no compiled code of its own. Before anyone
writes such a pass, this bench measures what it could buy, by standing in for it:

1. record: a copy of the source tree whose HTML parser also stores each page's parse result (the
   ParseResult, pickled) under its URL, crawls the web once; the results go into one SQLite file;
2. stand-in: a copy whose HTML parser, for a page it finds there, still decodes the page and builds
   lexbor's tree (what a compiled pass would keep paying), then reads the stored result and unpickles
   it (~40 us a page: about what building the result's Python objects, the outlinks and the text, would
   cost a compiled pass too) instead of walking the tree in Python; a page it does not find is parsed
   as usual;
3. the source tree and the stand-in crawl the same web in turn, and their pages/s and CPU are compared
   (with the floor's, on the real-page web).

The stand-in is an upper bound for a compiled pass: it does everything the crawler does (fetch, WARC,
digests, parts, updatedb, invertlinks) but the Python half of the parse, with a cost near what the
objects it must hand back take to build. Both copies are made under bench/.work/standin/ from --source
by appending a wrapper of HtmlParser.parse to the copy's crawler/parsers/html.py; nothing of it is
part of the crawler.

    .venv-bench/bin/python bench/parse_standin.py --web realweb --runs 2
    .venv-bench/bin/python bench/parse_standin.py --web seven --runs 2

--web realweb runs bench/realweb.py (`--only base,standin,floor`, which alternates the contenders run by
run); --web seven runs bench/realsites.py's one `crawl` of the seven core trees (`--contenders wget
--together --runs 1`), the source tree and the stand-in in turn, each beside its own run of wget.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import sqlite3
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work" / "standin"
BENCH_PYTHON = HERE.parent / ".venv-bench" / "bin" / "python"
CRAWLER_PYTHON = HERE.parent / ".venv-bench-crawler" / "bin" / "python"

# Appended to the copies' crawler/parsers/html.py. Both wrap HtmlParser.parse as the module defines it.
RECORD = '''

def _standin_record():  # bench/parse_standin.py: store each page's result under its URL
    import os as _os
    import pickle as _pickle

    parse, files = HtmlParser.parse, {}

    def recording(self, body, url, content_type):
        res = parse(self, body, url, content_type)
        if (f := files.get(_os.getpid())) is None:
            f = files[_os.getpid()] = open(_os.path.join(_os.environ["STANDIN_RECORD"], f"{_os.getpid()}.pkl"), "ab")
        _pickle.dump((url, _pickle.dumps(res, 5)), f)
        f.flush()
        return res

    HtmlParser.parse = recording


_standin_record()
'''
STANDIN = '''

def _standin():  # bench/parse_standin.py: lexbor's tree, then the stored result instead of the Python walk
    import os as _os
    import pickle as _pickle
    import sqlite3 as _sqlite3

    parse, dbs = HtmlParser.parse, {}

    def standing_in(self, body, url, content_type):
        if (db := dbs.get(_os.getpid())) is None:  # a connection made before a fork is not the child's to use
            db = dbs[_os.getpid()] = _sqlite3.connect(f"file:{_os.environ['STANDIN_DB']}?mode=ro", uri=True)
        row = db.execute("SELECT result FROM results WHERE url = ?", (url,)).fetchone() if body else None
        if row is None:
            return parse(self, body, url, content_type)
        LexborHTMLParser(decode_utf8(body, content_type, html=True)[0])
        return _pickle.loads(row[0])

    HtmlParser.parse = standing_in


_standin()
'''


def copy_tree(source: Path, name: str, hook: str) -> Path:
    tree = WORK / name
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    shutil.copytree(source / "crawler", tree / "crawler", ignore=shutil.ignore_patterns("__pycache__"))
    for file in ("config.yaml", "pyproject.toml"):
        shutil.copy2(source / file, tree / file)
    with open(tree / "crawler" / "parsers" / "html.py", "a") as html:
        html.write(hook)
    return tree


def store(records: Path, db_path: Path) -> int:
    """Every recorded (url, pickled result) into one SQLite table; the number of URLs."""
    db_path.unlink(missing_ok=True)
    db = sqlite3.connect(db_path)
    db.execute("CREATE TABLE results (url TEXT PRIMARY KEY, result BLOB)")
    for part in sorted(records.glob("*.pkl")):
        with open(part, "rb") as f:
            while True:
                try:
                    url, result = pickle.load(f)
                except EOFError:
                    break
                db.execute("INSERT OR REPLACE INTO results VALUES (?, ?)", (url, result))
    db.commit()
    (count,) = db.execute("SELECT count(*) FROM results").fetchone()
    db.close()
    return count


def realweb(only: str, trees: dict[str, Path], runs: int, env: dict[str, str]) -> str:
    """Run bench/realweb.py with contenders ``only``, the named trees among them; its output."""
    cmd = [str(BENCH_PYTHON), str(HERE / "realweb.py"), "--runs", str(runs), "--only", only]
    for name, tree in trees.items():
        cmd += ["--tree", f"{name}={tree}"]
    env = {k: v for k, v in {**os.environ, **env}.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"realweb.py failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout


def together(tree: Path, label: str, env: dict[str, str]) -> tuple[float, float, float]:
    """One realsites.py `crawl` of the seven trees from ``tree``: (its wall, its CPU s / 1000 pages, wget's wall)."""
    cmd = [str(CRAWLER_PYTHON), str(HERE / "realsites.py"), "--contenders", "wget", "--together", "--runs", "1",
           "--label", label, "--tree", str(tree)]
    done = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"realsites.py failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    results = json.loads((HERE / ".work" / "realsites" / f"results-{label}.json").read_text())
    run = results["together"][0]
    pages = sum(len(site["html"]) for site in run["sites"].values())
    wget = sum(statistics.median(walls["wget"]) for walls in results["walls"].values())
    return run["wall"], run["cpu"] / pages * 1000, wget


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--web", choices=("realweb", "seven"), default="realweb")
    parser.add_argument("--runs", type=int, default=2, help="runs of each tree (alternating)")
    parser.add_argument("--source", type=Path, default=HERE.parent, help="the crawler's source tree")
    parser.add_argument("--only", default="base,standin,floor", help="realweb.py's contenders (--web realweb)")
    args = parser.parse_args()
    for python in (BENCH_PYTHON, CRAWLER_PYTHON):
        if not python.exists():
            raise SystemExit(f"{python} is missing: run `make bench-realweb` or `make bench-realsites` first")
    source = args.source.resolve()
    record_tree = copy_tree(source, "record", RECORD)
    standin_tree = copy_tree(source, "standin", STANDIN)
    records = WORK / f"records-{args.web}"
    shutil.rmtree(records, ignore_errors=True)
    records.mkdir(parents=True)
    db_path = WORK / f"results-{args.web}.sqlite"
    recording = {"STANDIN_RECORD": str(records)}
    if args.web == "realweb":
        realweb("record", {"record": record_tree}, 1, recording)
    else:
        together(record_tree, "standin-record", recording)
    print(f"recorded {store(records, db_path)} pages' parse results in {db_path}", flush=True)
    env = {"STANDIN_DB": str(db_path)}
    if args.web == "realweb":
        out = realweb(args.only, {"base": source, "standin": standin_tree}, args.runs, env)
        print(out[out.find("| contender | pages/s"):])
        return
    rows: dict[str, list[tuple[float, float, float]]] = {"base": [], "standin": []}
    for run in range(args.runs):
        for name, tree in (("base", source), ("standin", standin_tree)):
            wall, cpu, wget = together(tree, f"standin-{name}", env)
            rows[name].append((wall, cpu, wget))
            print(f"run {run} {name:8s} {wall:6.2f} s  {cpu:.2f} CPU s / 1000 pages  wget {wget:6.2f} s  "
                  f"{wget / wall:.2f}x", flush=True)
    # Against the median of every run of wget: its speed of the hour moves more than either tree's.
    wget = statistics.median(g for got in rows.values() for _, _, g in got)
    for name, got in rows.items():
        wall = statistics.median(w for w, _, _ in got)
        print(f"{name:8s} median {wall:6.2f} s  {statistics.median(c for _, c, _ in got):.2f} CPU s / 1000 pages  "
              f"against wget's {wget:.2f} s (median of its {len(rows) * args.runs} runs): {wget / wall:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
