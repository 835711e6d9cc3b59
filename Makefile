# Every target creates the virtualenv and installs what it needs, so a fresh clone
# only ever needs `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEMO_DIR  := demo-crawl
DEMO_PORT_FILE := $(DEMO_DIR)/.port

.PHONY: help install demo test lint bench bench-compare bench-realsites bench-spark clean run

help:
	@echo "make demo   - install, serve examples/site on 127.0.0.1, crawl it 3 rounds, print stats"
	@echo "make test   - install and run the test suite"
	@echo "make lint   - ruff"
	@echo "make run    - install and start the daemon on config.yaml (seed it: drop URL files into seeds/)"

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	@rm -rf $(DEMO_DIR) && mkdir -p $(DEMO_DIR)
	@$(BIN)/python -m crawler.devserver --root examples/site --host 127.0.0.1 --port 0 \
	    --port-file $(DEMO_PORT_FILE) & echo $$! > $(DEMO_DIR)/.server.pid; \
	for i in $$(seq 1 100); do [ -f $(DEMO_PORT_FILE) ] && break; sleep 0.1; done; \
	port=$$(cat $(DEMO_PORT_FILE)); \
	sed "s/@PORT@/$$port/" examples/seeds.txt.in > $(DEMO_DIR)/seeds.txt; \
	echo "serving examples/site at http://127.0.0.1:$$port/"; \
	$(BIN)/crawler crawl --seeds $(DEMO_DIR)/seeds.txt --rounds 3 \
	    -D crawl_dir=$(DEMO_DIR) -D http.allow_private_networks=true -D fetcher.min_delay=0 \
	    -D log.format=console -D log.level=warning > $(DEMO_DIR)/segments.txt; \
	status=$$?; kill $$(cat $(DEMO_DIR)/.server.pid); \
	[ $$status -eq 0 ] || exit $$status; \
	echo; echo "== crawl database ($(DEMO_DIR)/webdb) =="; \
	$(BIN)/crawler readdb --stats -D crawl_dir=$(DEMO_DIR); \
	echo; echo "== segments =="; cat $(DEMO_DIR)/segments.txt; \
	echo; echo "Try: $(BIN)/crawler readdb --dump -D crawl_dir=$(DEMO_DIR) | head"; \
	echo "     $(BIN)/crawler readseg --dump $$(tail -n1 $(DEMO_DIR)/segments.txt) -D crawl_dir=$(DEMO_DIR) | head -c 600"

run: $(STAMP)
	@mkdir -p seeds
	$(BIN)/crawler daemon -c config.yaml

test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check crawler tests bench

BENCH_VENV := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.installed

# Scrapy and matplotlib live in their own virtualenv: peers and plotting are not our dependencies.
$(BENCH_STAMP): $(STAMP)
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/pip install --quiet scrapy matplotlib aiohttp uvloop selectolax pyarrow httptools pyreqwest turbohtml
	touch $(BENCH_STAMP)

# The crawler as users install it (no dev or spark extras, so no pandas or numpy for pyarrow to import
# into each process): what bench-compare times.
BENCH_CRAWLER := .venv-bench-crawler
BENCH_CRAWLER_STAMP := $(BENCH_CRAWLER)/.installed
$(BENCH_CRAWLER_STAMP): pyproject.toml
	$(PYTHON) -m venv $(BENCH_CRAWLER)
	$(BENCH_CRAWLER)/bin/pip install --quiet --upgrade pip
	$(BENCH_CRAWLER)/bin/pip install --quiet -e .
	touch $(BENCH_CRAWLER_STAMP)

bench: $(STAMP) bench-compare
	@for f in bench/bench_*.py; do echo "== $$f"; $(BIN)/python $$f; done

# Crawler vs Scrapy vs the aiohttp floor on a generated 120-host web served by nginx.
bench-compare: $(BENCH_STAMP) $(BENCH_CRAWLER_STAMP)
	$(BENCH_VENV)/bin/python bench/compare.py --runs 3

# Crawl, daemon and Scrapy on a 1,000-host loopback web with latency, judged by bench/observer.py:
# how close each comes to the politeness bound (docs/benchmarks.md "Politeness as the server sees it").
.PHONY: bench-manyhosts
bench-manyhosts: $(BENCH_STAMP) $(BENCH_CRAWLER_STAMP)
	$(BENCH_VENV)/bin/python bench/manyhosts.py

# wget, the crawler and Scrapy on Debian documentation trees served by nginx (packages fetched once with
# apt-get download, nginx and wget installed with apt-get if missing): docs/benchmarks.md "Real sites".
# One `crawl` per tree, then one `crawl` of all the trees at once (--together), as users crawl a list of sites.
bench-realsites: $(BENCH_STAMP) $(BENCH_CRAWLER_STAMP)
	$(BENCH_CRAWLER)/bin/python bench/realsites.py --together

# The crawler's page text and links against an independent HTML library's (turbohtml, in the peers' virtualenv)
# on those trees: pages where they differ, and how (docs/benchmarks.md "Another HTML parser measured").
.PHONY: bench-pagecheck
bench-pagecheck: $(BENCH_STAMP) $(BENCH_CRAWLER_STAMP)
	$(BENCH_CRAWLER)/bin/python bench/pagecheck.py

# Crawler vs Scrapy vs the floor on the documentation trees above (each on 2 loopback addresses) next to
# bench-compare's generated hosts, with Crawl-delay hosts, slow pages and a spider trap; summed RSS of every
# process of each contender: docs/benchmarks.md "A web of real pages".
.PHONY: bench-realweb
bench-realweb: $(BENCH_STAMP) $(BENCH_CRAWLER_STAMP)
	$(BENCH_VENV)/bin/python bench/realweb.py

# What a compiled HTML parse pass would buy: the crawler against a stand-in that still builds lexbor's tree but
# hands back each page's recorded parse, on the real-page web and on the seven trees in one `crawl`
# (docs/benchmarks.md "What a compiled parse pass would buy").
.PHONY: bench-standin
bench-standin: $(BENCH_STAMP) $(BENCH_CRAWLER_STAMP)
	$(BENCH_VENV)/bin/python bench/parse_standin.py --web realweb
	$(BENCH_VENV)/bin/python bench/parse_standin.py --web seven

# The jobs on a standalone Spark cluster (a master and 2 workers on loopback) vs DuckDB: docs/benchmarks.md "Spark".
bench-spark: $(STAMP)
	$(BIN)/python bench/bench_spark_cluster.py

clean:
	rm -rf $(VENV) $(BENCH_VENV) $(BENCH_CRAWLER) $(DEMO_DIR) bench/.work .pytest_cache .ruff_cache
