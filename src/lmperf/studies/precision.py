"""Mixed-precision demos that need no model: the handout's accumulation loops.

    python -m lmperf.studies.precision accumulation --out results/precision/accumulation.csv
"""

import argparse

import torch

from lmperf.measure import fingerprint, write_rows

# (accumulator dtype, summand dtype, cast summand to the accumulator's dtype before adding)
ACCUMULATION_CASES = [
    (torch.float32, torch.float32, False),
    (torch.float16, torch.float16, False),
    (torch.float32, torch.float16, False),
    (torch.float32, torch.float16, True),
]


def accumulate(acc_dtype: torch.dtype, summand_dtype: torch.dtype, cast: bool, n: int = 1000, value: float = 0.01) -> float:
    """Sum ``value`` n times into a zero of ``acc_dtype``, exactly as the handout's loops do."""
    total = torch.tensor(0, dtype=acc_dtype)
    for _ in range(n):
        x = torch.tensor(value, dtype=summand_dtype)
        total += x.type(acc_dtype) if cast else x
    return total.item()


def accumulation_rows(n: int = 1000, value: float = 0.01) -> list[dict]:
    env = fingerprint(torch.device("cpu"))
    rows = []
    for acc, summand, cast in ACCUMULATION_CASES:
        result = accumulate(acc, summand, cast, n, value)
        rows.append({
            "study": "accumulation",
            "accumulator": str(acc).removeprefix("torch."),
            "summand": str(summand).removeprefix("torch."),
            "summand_cast_to_accumulator": cast,
            "n_adds": n,
            "summand_value": value,
            "summand_stored": torch.tensor(value, dtype=summand).item(),
            "result": result,
            "abs_error": abs(result - n * value),
            "status": "ok",
            "note": "",
            **env,
        })
    return rows


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("experiment", choices=["accumulation"])
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    write_rows(accumulation_rows(), args.out)


if __name__ == "__main__":
    main()
