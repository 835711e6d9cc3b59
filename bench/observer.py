"""The outside judge of politeness: what the servers' access logs say a crawler did (issue 15).

Input: the requests a server logged (nginx's access log in ``NGINX_LOG_FORMAT``, the JSON-lines log
of bench/manyhosts.py's server, or crawler/devserver.py's in-memory records) and, per origin, what
it served and promised: its robots.txt, its delay, its in-flight limit, its spider-trap prefixes.
Output, per politeness queue and in total:

- robots violations: pages its served robots.txt disallows (a 5xx or 429 robots.txt disallows all,
  another 4xx allows all), and pages requested before any robots.txt answer of their origin;
- the largest number of requests in flight at once (start = end - request time, end = log time);
- the tightest gap between two request starts against its delay, and how many gaps are below the delay;
- requests that started before a Retry-After (429 or 503) had expired;
- the same URL requested again after a final answer (not a 429 or 5xx), robots.txt aside;
- requests into spider traps.

Everything here is independent of the crawler: URLs are compared by this module's own small rules
(scheme and host case, default port, dot segments, repeated slashes, percent-encoding case) and
robots.txt is matched by its own RFC 9309 matcher, so a bug in the crawler's normalizer or in
Protego cannot hide itself. Usable from tests (tests/e2e/test_politeness_observed.py) and from
bench/compare.py and bench/manyhosts.py.

    python bench/observer.py LOG [--format nginx|jsonl] [--spec SPEC.json] [--min-delay S] [--in-flight N]

SPEC.json: {"ORIGIN": {"robots": TEXT, "delay": S, "in_flight": N, "queue": NAME, "traps": [PREFIX],
"retry_after": {PATH: S}}, ...}; an origin is "scheme://host:port".
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import json
import re
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields
from functools import cached_property
from pathlib import Path

# nginx: $msec is the log time (the response's end) in seconds with millisecond resolution,
# $request_time the seconds since the request's first bytes were read; start = msec - request_time.
NGINX_LOG_FORMAT = ('$msec $request_time $connection $scheme $server_addr $server_port "$http_host" '
                    '"$request" $status "$sent_http_retry_after"')
_NGINX_LINE = re.compile(r'(?P<msec>[\d.]+) (?P<rt>[\d.]+) (?P<conn>\d+) (?P<scheme>\w+) (?P<addr>\S+) '
                         r'(?P<port>\d+) "(?P<host>[^"]*)" "(?P<request>[^"]*)" (?P<status>\d+) "(?P<ra>[^"]*)"$')
DEFAULT_PORTS = {"http": 80, "https": 443}
UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# Clock granularity: nginx logs milliseconds, so two starts 1 ms apart may be 0 or 2 ms apart in its
# log; a gap or a Retry-After wait that falls short by less than this is not counted.
TOLERANCE = 0.002


@dataclass(frozen=True)
class Request:
    """One request as the server logged it; times in seconds on one clock."""

    start: float
    end: float
    scheme: str
    host: str
    port: int
    method: str
    target: str  # the request-target as sent: path and query, still percent-encoded
    status: int
    retry_after: float | None = None  # the Retry-After the server sent, in seconds
    conn: str = ""

    # cached: a log is judged by several rules, each asking these (a frozen dataclass still has a __dict__)
    @cached_property
    def origin(self) -> str:
        return origin(self.scheme, self.host, self.port)

    @cached_property
    def path(self) -> str:
        return normalize_target(self.target)

    @cached_property
    def url(self) -> str:
        return self.origin + self.path

    @property
    def is_robots(self) -> bool:
        return self.path == "/robots.txt"


@dataclass
class Origin:
    """What one origin served and promised. ``delay`` None: its robots.txt Crawl-delay, else the min delay."""

    robots: str | None = None  # the body it served with a 2xx; None: no rules (allow all)
    delay: float | None = None
    in_flight: int | None = None  # None: the observe() default
    queue: str | None = None  # the politeness queue it belongs to; None: its host
    traps: tuple[str, ...] = ()  # path prefixes of its spider traps
    retry_after: dict[str, float] = field(default_factory=dict)  # path -> seconds, for logs without it


# ---- URL rules of our own ----------------------------------------------------------------------

def _percent(text: str) -> str:
    """RFC 3986 6.2.2: %XX of an unreserved character decoded, other %xx upper-cased, and raw bytes
    outside printable ASCII encoded (RFC 9309 2.2.2 compares paths the same way)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "%" and i + 2 < n and _is_hex(text[i + 1:i + 3]):
            decoded = chr(int(text[i + 1:i + 3], 16))
            out.append(decoded if decoded in UNRESERVED else "%" + text[i + 1:i + 3].upper())
            i += 3
            continue
        if ord(ch) > 126 or ord(ch) <= 32:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8"))
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def _is_hex(two: str) -> bool:
    return len(two) == 2 and all(c in "0123456789abcdefABCDEF" for c in two)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 5.2.4."""
    out: list[str] = []
    for segment in path.split("/")[1:]:
        if segment == "..":
            if out:
                out.pop()
        elif segment != ".":
            out.append(segment)
    result = "/" + "/".join(out)
    # "/a/b/.." names the folder /a/, not the file /a
    return result + "/" if path.endswith(("/.", "/..")) and not result.endswith("/") else result


def normalize_target(target: str) -> str:
    """A request-target (path?query, no fragment) in our canonical form."""
    target = target.split("#", 1)[0]
    if target.lower().startswith(("http://", "https://")):  # absolute-form (RFC 9112 3.2.2): its path
        target = "/" + target.split("://", 1)[1].partition("/")[2]
    path, sep, query = target.partition("?")
    if not path.startswith("/"):
        path = "/" + path
    path = re.sub(r"/{2,}", "/", _percent(path))
    path = _remove_dot_segments(path)
    return path + (sep + _percent(query) if sep else "")


def origin(scheme: str, host: str, port: int | None) -> str:
    scheme, host = scheme.lower(), host.lower().rstrip(".")
    port = port or DEFAULT_PORTS.get(scheme)
    return f"{scheme}://{host}" + ("" if port == DEFAULT_PORTS.get(scheme) else f":{port}")


def _host_of(normalized_origin: str) -> str:
    authority = normalized_origin.split("://", 1)[1]
    return authority[: authority.index("]") + 1] if authority.startswith("[") else authority.split(":", 1)[0]


def normalize_url(url: str) -> str:
    """An absolute http(s) URL in our canonical form; the origin and the target normalized."""
    scheme, rest = url.split("://", 1)
    authority, slash, target = rest.partition("/")
    authority = authority.rsplit("@", 1)[-1]
    if authority.startswith("["):
        host, _, port = authority[1:].partition("]")
        host, port = f"[{host}]", port.lstrip(":")
    else:
        host, _, port = authority.partition(":")
    return origin(scheme, host, int(port) if port else None) + normalize_target(slash + target)


# ---- robots.txt, RFC 9309 ----------------------------------------------------------------------

@dataclass
class _Group:
    agents: list[str] = field(default_factory=list)
    rules: list[tuple[bool, str]] = field(default_factory=list)  # (allow, pattern)
    crawl_delay: float | None = None


class Robots:
    """RFC 9309: groups by product token, merged when several match; the longest matching pattern
    wins and Allow wins a tie; ``*`` and a final ``$``; a line not understood ends nothing."""

    def __init__(self, text: str) -> None:
        self.groups: list[_Group] = []
        group: _Group | None = None
        ruled = False
        for raw in re.split(r"\r\n|\r|\n", text.removeprefix("\ufeff")):
            key, sep, value = raw.split("#", 1)[0].partition(":")
            if not sep:
                continue
            key, value = key.strip().lower(), value.strip()
            if key == "user-agent":
                if group is None or ruled:
                    group, ruled = _Group(), False
                    self.groups.append(group)
                group.agents.append(value)
            elif key in ("allow", "disallow") and group is not None:
                ruled = True
                if value:
                    group.rules.append((key == "allow", value))
            elif key == "crawl-delay" and group is not None:
                with contextlib.suppress(ValueError):  # a bad value sets nothing, as for a crawler
                    group.crawl_delay = float(value)

    def _groups(self, agent: str) -> list[_Group]:
        agent = agent.lower()

        def token(value: str) -> str:
            return re.match(r"[A-Za-z_-]*", value).group(0).lower()

        mine = [g for g in self.groups if any(token(a) == agent for a in g.agents)]
        return mine or [g for g in self.groups if any(a.startswith("*") for a in g.agents)]

    def crawl_delay(self, agent: str) -> float | None:
        return next((g.crawl_delay for g in self._groups(agent) if g.crawl_delay is not None), None)

    def allowed(self, agent: str, target: str) -> bool:
        path = normalize_target(target)
        if path == "/robots.txt":
            return True
        best, allow = -1, True
        for group in self._groups(agent):
            for rule_allow, pattern in group.rules:
                if _matches(pattern, path):
                    length = len(pattern)
                    if length > best or (length == best and rule_allow):
                        best, allow = length, rule_allow
        return allow


def _matches(pattern: str, path: str) -> bool:
    anchored = pattern.endswith("$")
    body = _percent(pattern[:-1] if anchored else pattern)
    regex = ".*".join(re.escape(part) for part in body.split("*")) + (r"\Z" if anchored else "")
    return re.match(regex, path) is not None


# ---- reading logs ------------------------------------------------------------------------------

def read_nginx(lines: Iterable[str], name: str = "access.log") -> Iterator[Request]:
    """Requests of an nginx access log written with ``NGINX_LOG_FORMAT``; a client's unparsable
    request line (nginx logs those as 400s) is skipped, a line in another format is an error."""
    for lineno, line in enumerate(lines, 1):
        line = line.rstrip("\n")
        if not line:
            continue
        m = _NGINX_LINE.match(line)
        if not m:
            raise ValueError(f"{name} line {lineno}: not in the observer's log format: {line[:200]!r}")
        parts = m["request"].split(" ")
        if len(parts) != 3:
            continue
        end = float(m["msec"])
        host = m["host"] or m["addr"]
        host = _host_of("x://" + host)
        ra = m["ra"]
        yield Request(start=end - float(m["rt"]), end=end, scheme=m["scheme"], host=host, port=int(m["port"]),
                      method=parts[0], target=parts[1], status=int(m["status"]),
                      retry_after=float(ra) if ra not in ("", "-") and _is_number(ra) else None, conn=m["conn"])


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


_REQUEST_FIELDS = {f.name for f in fields(Request)}


def read_jsonl(lines: Iterable[str], name: str = "requests.jsonl") -> Iterator[Request]:
    """Requests of a JSON-lines log: one object per line with Request's fields (more are ignored)."""
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            yield Request(**{k: v for k, v in obj.items() if k in _REQUEST_FIELDS})
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{name} line {lineno}: {exc}") from None


def from_devserver(records: Iterable, base_url: str) -> list[Request]:
    """crawler/devserver.py's ``SiteServer.requests`` (one origin per server) as Requests."""
    scheme, rest = base_url.split("://", 1)
    host, _, port = rest.rstrip("/").rpartition(":")
    return [Request(r.started, r.finished, scheme, host, int(port), r.method, r.path_qs, r.status)
            for r in records]


def request_to_json(request: Request) -> str:
    return json.dumps({f: getattr(request, f) for f in _REQUEST_FIELDS}, sort_keys=True)


# ---- judging -----------------------------------------------------------------------------------

@dataclass
class Report:
    """One queue's figures, or (combined) a whole crawl's."""

    name: str
    requests: int = 0
    robots_requests: int = 0
    robots_denied: int = 0  # pages its served robots.txt disallows
    before_robots: int = 0  # pages requested before their origin had answered robots.txt
    max_in_flight: int = 0
    in_flight_limit: int = 0
    over_in_flight: int = 0  # queues (in a total: how many) that went above their limit
    delay: float = 0.0  # the largest delay that applied
    min_gap: float | None = None  # the tightest gap between consecutive starts: least above (or most below) its delay
    min_gap_delay: float = 0.0  # the delay that applied to that gap
    gaps_below_delay: int = 0
    early_retry_after: int = 0
    duplicates: int = 0
    trap_requests: int = 0
    first_start: float | None = None
    last_end: float | None = None
    queues: int = 1
    examples: list[str] = field(default_factory=list)  # a few violations, to find them in the log

    @property
    def robots_violations(self) -> int:
        return self.robots_denied + self.before_robots

    @property
    def violations(self) -> int:
        return (self.robots_violations + self.over_in_flight + self.gaps_below_delay + self.early_retry_after)

    def note(self, text: str) -> None:
        if len(self.examples) < 10:
            self.examples.append(text)


def combine(name: str, reports: Iterable[Report]) -> Report:
    """The total over queues (or runs): counts summed, the worst in-flight and the tightest gap kept."""
    total = Report(name, queues=0)
    for r in reports:
        total.queues += r.queues
        for attr in ("requests", "robots_requests", "robots_denied", "before_robots", "over_in_flight",
                     "gaps_below_delay", "early_retry_after", "duplicates", "trap_requests"):
            setattr(total, attr, getattr(total, attr) + getattr(r, attr))
        total.max_in_flight = max(total.max_in_flight, r.max_in_flight)
        total.in_flight_limit = max(total.in_flight_limit, r.in_flight_limit)
        total.delay = max(total.delay, r.delay)
        if r.min_gap is not None and (total.min_gap is None
                                      or r.min_gap - r.min_gap_delay < total.min_gap - total.min_gap_delay):
            total.min_gap, total.min_gap_delay = r.min_gap, r.min_gap_delay
        if r.first_start is not None:
            total.first_start = r.first_start if total.first_start is None else min(total.first_start, r.first_start)
            total.last_end = r.last_end if total.last_end is None else max(total.last_end, r.last_end)
        for example in r.examples:
            total.note(example)
    return total


def max_in_flight(requests: Iterable[Request]) -> int:
    """The most requests open at one instant, counted by connection (HTTP/1.1 sends one request at a
    time on a connection). At one timestamp, ends go before starts: a request that ends when another
    starts does not overlap it. A request logged with no duration (nginx logs milliseconds) is open at
    its instant: its end goes after every start of that timestamp."""
    events = []
    for i, r in enumerate(requests):
        conn = r.conn or f"#{i}"
        events.append((r.start, 1, conn))
        events.append((r.end, 2 if r.end <= r.start else 0, conn))
    events.sort(key=lambda e: (e[0], e[1]))
    open_on: dict[str, int] = defaultdict(int)
    peak = 0
    for _, phase, conn in events:
        if phase == 1:
            open_on[conn] += 1
            peak = max(peak, len(open_on))
        else:
            open_on[conn] -= 1
            if not open_on[conn]:
                del open_on[conn]
    return peak


class _Verdicts:
    """One origin's robots.txt answers in time order, and the rules each one set."""

    def __init__(self, spec: Origin, answers: list[Request]) -> None:
        self.answers = sorted(answers, key=lambda r: r.end)
        self.ends = [r.end for r in self.answers]
        self.rules = Robots(spec.robots) if spec.robots is not None else None

    def verdict(self, start: float, agent: str, target: str) -> str | None:
        """None if allowed; else why not."""
        i = bisect.bisect_right(self.ends, start)
        if i == 0:
            return "before robots.txt"
        status = self.answers[i - 1].status
        if status == 429 or status >= 500:
            return f"robots.txt answered {status}"
        # a 3xx was followed to the body the spec names; its rules decide as a 2xx's would
        if status < 400 and self.rules is not None and not self.rules.allowed(agent, target):
            return "disallowed by robots.txt"
        return None

    def known_since(self) -> float | None:
        """When the origin's Crawl-delay became knowable: the end of its first 2xx robots.txt."""
        return next((r.end for r in self.answers if 200 <= r.status < 300), None)


def observe(requests: Iterable[Request], origins: dict[str, Origin] | None = None, *, agent: str = "crawler",
            min_delay: float = 0.0, in_flight: int = 1, retry_after_cap: float | None = None,
            tolerance: float = TOLERANCE, name: str = "total") -> tuple[Report, dict[str, Report]]:
    """Judge a log. Returns the total and one report per politeness queue.

    ``origins`` maps an origin ("http://host:port", any case, default port optional) to what it served;
    an origin missing there is judged with the defaults (no robots rules, ``min_delay``, ``in_flight``).
    A queue's delay at a request start is the largest delay of its origins known by then: ``min_delay``,
    or an origin's own delay once its first 2xx robots.txt has arrived (its Crawl-delay cannot be known
    earlier).
    """
    specs = {normalize_url(o + "/").rstrip("/"): spec for o, spec in (origins or {}).items()}
    by_origin: dict[str, list[Request]] = defaultdict(list)
    for r in requests:
        by_origin[r.origin].append(r)
    queues: dict[str, list[str]] = defaultdict(list)
    for o in set(by_origin) | set(specs):
        spec = specs.get(o, Origin())
        queues[spec.queue or _host_of(o)].append(o)
    reports = {}
    for queue, members in sorted(queues.items()):
        reports[queue] = _observe_queue(queue, members, by_origin, specs, agent=agent, min_delay=min_delay,
                                        in_flight=in_flight, retry_after_cap=retry_after_cap, tolerance=tolerance)
    return combine(name, reports.values()), reports


def _observe_queue(queue: str, members: list[str], by_origin: dict[str, list[Request]], specs: dict[str, Origin],
                   *, agent: str, min_delay: float, in_flight: int, retry_after_cap: float | None,
                   tolerance: float) -> Report:
    report = Report(queue)
    reqs = sorted((r for o in members for r in by_origin.get(o, ())), key=lambda r: (r.start, r.end))
    limits = [specs[o].in_flight for o in members if o in specs and specs[o].in_flight is not None]
    report.in_flight_limit = min(limits) if limits else in_flight
    if not reqs:
        return report
    report.requests = len(reqs)
    report.first_start, report.last_end = reqs[0].start, max(r.end for r in reqs)
    verdicts, delays = {}, []  # delays: (known since, delay) of each origin
    for o in members:
        spec = specs.get(o, Origin())
        verdicts[o] = _Verdicts(spec, [r for r in by_origin.get(o, ()) if r.is_robots])
        delay = spec.delay
        if delay is None:
            robots_delay = Robots(spec.robots).crawl_delay(agent) if spec.robots is not None else None
            delay = robots_delay if robots_delay is not None else min_delay
        since = verdicts[o].known_since()
        if delay != min_delay and since is not None:
            delays.append((since, delay))

    def delay_at(t: float) -> float:
        # Before any robots.txt arrived the crawler knows only min_delay; afterwards each origin's own.
        known = [d for since, d in delays if since <= t]
        return max(known) if known else min_delay

    # robots.txt, duplicates, traps
    final: dict[str, bool] = {}
    for r in reqs:
        spec = specs.get(r.origin, Origin())
        path = r.path
        if r.is_robots:
            report.robots_requests += 1
        else:
            why = verdicts[r.origin].verdict(r.start, agent, r.target)
            if why == "before robots.txt":
                report.before_robots += 1
            elif why:
                report.robots_denied += 1
            if why:
                report.note(f"{r.origin}{path} at {r.start:.3f}: {why}")
            if final.get(r.url):
                report.duplicates += 1
            final[r.url] = final.get(r.url, False) or not (r.status == 429 or r.status >= 500)
        if any(path.startswith(normalize_target(t)) for t in spec.traps):
            report.trap_requests += 1
    # in flight
    report.max_in_flight = max_in_flight(reqs)
    if report.max_in_flight > report.in_flight_limit:
        report.over_in_flight = 1
        report.note(f"{queue}: {report.max_in_flight} requests in flight, limit {report.in_flight_limit}")
    # gaps between consecutive starts
    for a, b in zip(reqs, reqs[1:], strict=False):
        gap, delay = b.start - a.start, delay_at(b.start)
        report.delay = max(report.delay, delay)
        if report.min_gap is None or gap - delay < report.min_gap - report.min_gap_delay:
            report.min_gap, report.min_gap_delay = gap, delay
        if gap < delay - tolerance:
            report.gaps_below_delay += 1
            report.note(f"{queue}: starts {gap:.3f}s apart at {b.start:.3f} ({b.url}), delay {delay:g}s")
    report.delay = max(report.delay, delay_at(reqs[-1].end))
    # Retry-After: no start to the queue after such an answer until it expired (counted from the
    # answer's end at the server, the earliest the crawler could have read it)
    starts, early = [r.start for r in reqs], set()
    for r in reqs:
        if not (r.status == 429 or r.status == 503):
            continue
        wait = r.retry_after if r.retry_after is not None else specs.get(r.origin, Origin()).retry_after.get(r.path)
        if wait is None:
            continue
        if retry_after_cap is not None:
            wait = min(wait, retry_after_cap)
        # A start within the tolerance after the answer's end may have been sent before the answer could be
        # read (another slot of the queue); one short of the expiry by less is clock granularity.
        lo = bisect.bisect_right(starts, r.end + tolerance)
        hi = bisect.bisect_left(starts, r.end + wait - tolerance)
        for i in range(lo, hi):
            if i not in early:  # a request counts once, however many answers it disobeyed
                early.add(i)
                report.note(f"{queue}: {reqs[i].url} at {reqs[i].start:.3f}, {reqs[i].start - r.end:.3f}s after "
                            f"{r.status} Retry-After {wait:g} on {r.url}")
    report.early_retry_after = len(early)
    return report


# ---- printing ----------------------------------------------------------------------------------

HEADER = ("| {label} | requests | robots violations (disallowed / before robots.txt) | max in flight (limit) | "
          "tightest start gap s (its delay) | gaps below delay | before Retry-After | same URL twice | spider trap |")


def table_row(report: Report) -> str:
    gap = "-" if report.min_gap is None else f"{report.min_gap:.3f} ({report.min_gap_delay:g})"
    return (f"| {report.name} | {report.requests} | {report.robots_violations} ({report.robots_denied} / "
            f"{report.before_robots}) | {report.max_in_flight} ({report.in_flight_limit}) | {gap} | "
            f"{report.gaps_below_delay} | {report.early_retry_after} | {report.duplicates} | {report.trap_requests} |")


def table(reports: Iterable[Report], label: str = "contender") -> str:
    head = HEADER.format(label=label)
    return "\n".join([head, "|" + "---|" * head.count(" | ") + "---|", *map(table_row, reports)])


def load_spec(path: Path) -> dict[str, Origin]:
    data = json.loads(path.read_text(encoding="utf-8"))
    out = {}
    for o, spec in data.items():
        try:
            out[o] = Origin(**{**spec, "traps": tuple(spec.get("traps", ()))})
        except TypeError as exc:
            raise ValueError(f"{path}: origin {o}: {exc}") from None
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", type=Path)
    parser.add_argument("--format", choices=["nginx", "jsonl"], default="nginx")
    parser.add_argument("--spec", type=Path, help="JSON: origin -> what it served (see the module doc)")
    parser.add_argument("--agent", default="crawler")
    parser.add_argument("--min-delay", type=float, default=0.0)
    parser.add_argument("--in-flight", type=int, default=1)
    parser.add_argument("--all", action="store_true", help="a row for every queue, not only the failing ones")
    args = parser.parse_args(argv)
    try:
        origins = load_spec(args.spec) if args.spec else {}
        with open(args.log, encoding="utf-8") as fh:
            reader = read_nginx if args.format == "nginx" else read_jsonl
            reqs = list(reader(fh, str(args.log)))
    except (OSError, ValueError) as exc:
        print(f"observer: {exc}", file=sys.stderr)
        return 2
    total, queues = observe(reqs, origins, agent=args.agent, min_delay=args.min_delay, in_flight=args.in_flight)
    shown = [r for r in queues.values() if args.all or r.violations or r.duplicates or r.trap_requests]
    print(table([*shown, total], label="queue"))
    for example in total.examples:
        print(f"  {example}")
    return 1 if total.violations else 0


if __name__ == "__main__":
    sys.exit(main())
