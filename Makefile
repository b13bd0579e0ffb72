# Two commands on a fresh machine with Python 3.11: `make demo` and `make test`.
# Each creates .venv and installs everything in ONE pip call with BBF (a later separate install could upgrade
# langchain-core / transformers / websockets under BBF's pins).
PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.rag_plugin-installed

export USE_TF := 0
export ANONYMIZED_TELEMETRY := False

.PHONY: install demo test bench eval clean corpus

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "Python 3.11 is required (BBF pins tensorflow 2.14)"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -e '.[dev]'
	$(BIN)/python -m rag_plugin setup-nltk
	touch $(STAMP)

install: $(STAMP)

demo: install
	HF_HUB_OFFLINE=1 $(BIN)/python bots/rag_bot.py

test: install
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q $(PYTEST_ARGS)

bench: install
	HF_HUB_OFFLINE=1 $(BIN)/python benchmarks/ingest.py $(BENCH_ARGS)

corpus: install
	$(BIN)/python data/build_pdfs.py

clean:
	rm -rf .demo vector_store .pytest_cache
