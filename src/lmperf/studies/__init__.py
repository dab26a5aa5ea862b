"""One small CLI per kind of target: ``python -m lmperf.studies.<study> ... --out PATH``."""
