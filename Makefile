# Two commands on a fresh machine with Python 3.11: `make demo` and `make test`.
# Each creates .venv and installs everything in ONE pip call with BBF (a later separate install could upgrade
# langchain-core / transformers / websockets under BBF's pins).
PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.rag_plugin-installed

export USE_TF := 0
export ANONYMIZED_TELEMETRY := False

.PHONY: install demo test test-bbf test-baf bench eval clean corpus chromium screenshot startup wheel-check

# The web chat's browser test drives Debian's chromium with Playwright (Playwright's own browsers are never
# downloaded). Installed once, as root, when missing; elsewhere that test is skipped.
CHROMIUM ?= /usr/bin/chromium

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "Python 3.11 is required (BBF pins tensorflow 2.14)"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -e '.[all]'
	$(BIN)/python -m rag_plugin setup-nltk
	touch $(STAMP)

install: $(STAMP)

demo: install
	HF_HUB_OFFLINE=1 $(BIN)/python bots/rag_bot.py

chromium:
	@if [ ! -x $(CHROMIUM) ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo 'Installing chromium for the web chat browser test (apt-get)'; \
	    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else \
	    echo 'warning: no $(CHROMIUM) (install it: sudo apt-get install -y chromium); the browser test is skipped'; \
	  fi; \
	fi

# The whole test suite on both hosts, side by side: BBF 1.5 in .venv and BAF 4.5 in .venv-baf (the README's test
# command; CI runs it). Each suite waits on subprocesses, browsers and servers for much of its time (one suite uses
# about one core of two), so side by side they end sooner; each suite's output is printed when it ends.
# `make test-bbf` / `make test-baf` run one host.
test:
	$(MAKE) -j2 --output-sync=target test-bbf test-baf

test-bbf: install chromium
	HF_HUB_OFFLINE=1 RAG_PLUGIN_CHROMIUM=$(CHROMIUM) $(BIN)/python -m pytest -q -m 'not baf' $(PYTEST_ARGS)

# The README's web chat screenshot (docs/webchat.png), from the browser test; tests alone never write to the checkout.
screenshot: install chromium
	HF_HUB_OFFLINE=1 RAG_PLUGIN_CHROMIUM=$(CHROMIUM) RAG_PLUGIN_SCREENSHOTS=docs $(BIN)/python -m pytest -q \
	  tests/test_webchat.py -k test_web_chat_answers_with_sources_not_found_upload_and_streaming

# The same plugin on the BESSER Agentic Framework (BAF 4.5: langchain 0.3, chromadb 1.x, pypdf 6), in a second venv
# of its own (BBF and BAF pin stacks that cannot share one), installed in ONE pip call: every test but the few that
# check BBF itself (`-m "not bbf"`); the channel tests run on the installed framework (tests/framework.py).
BAF_VENV ?= .venv-baf
BAF_BIN := $(BAF_VENV)/bin
BAF_STAMP := $(BAF_VENV)/.rag_plugin-installed
BAF_EXTRAS := baf,server,eval,docx,dev,redis,postgres,langchain-tests

$(BAF_STAMP): setup.cfg pyproject.toml
	$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "Python 3.11 is required"'
	$(PYTHON) -m venv $(BAF_VENV)
	$(BAF_BIN)/python -m pip install -q --upgrade pip
	$(BAF_BIN)/python -m pip install -e '.[$(BAF_EXTRAS)]'
	$(BAF_BIN)/python -m rag_plugin setup-nltk
	touch $(BAF_STAMP)

test-baf: $(BAF_STAMP) chromium
	HF_HUB_OFFLINE=1 RAG_PLUGIN_CHROMIUM=$(CHROMIUM) $(BAF_BIN)/python -m pytest -q -m 'not bbf' $(PYTEST_ARGS)

# Start-up time of the command line, by stage, and `ask` end to end (median of 3).
startup: install
	HF_HUB_OFFLINE=1 $(BIN)/python benchmarks/startup.py $(BENCH_ARGS)

# Build the wheel and sdist, install the wheel without extras into a fresh venv (one pip call) and run it: a few
# minutes (it installs the BBF stack again).
wheel-check: install
	$(BIN)/python benchmarks/wheel_check.py $(BENCH_ARGS)

bench: install
	HF_HUB_OFFLINE=1 $(BIN)/python benchmarks/ingest.py $(BENCH_ARGS)

corpus: install
	$(BIN)/python data/build_pdfs.py

clean:
	rm -rf .demo vector_store .pytest_cache
