"""The report's data-parallel section from this slice's rows: `python render.py > section.md`, run in
this folder with the project's `src` on PYTHONPATH."""

from pathlib import Path

import pandas as pd

from lmperf.report.ddp_section import render_training

train = pd.concat([pd.read_csv(path) for path in sorted(Path("rows/ddp").glob("train-*.csv"))], ignore_index=True)
timeline = pd.read_csv("rows/ddp/timeline-n4.csv.gz")
print("\n".join(render_training(train, None, timeline)))
