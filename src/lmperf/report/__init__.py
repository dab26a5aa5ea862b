"""Aggregate result CSVs, draw figures and render report/final.md; every number comes from a CSV."""
