"""Mixed-precision demos that need no big model: the handout's accumulation loops, the dtypes that
autocast actually produces in its ToyModel, and why normalization statistics stay in fp32.

    python -m lmperf.studies.precision accumulation --out results/precision/accumulation.csv
    python -m lmperf.studies.precision autocast --out results/precision/autocast.csv
    python -m lmperf.studies.precision layernorm --out results/precision/layernorm.csv
"""

import argparse

import torch
import torch.nn as nn

from lmperf import grid
from lmperf.measure import fingerprint, write_rows
from lmperf.studies import run_study

# (accumulator dtype, summand dtype, cast summand to the accumulator's dtype before adding)
ACCUMULATION_CASES = [
    (torch.float32, torch.float32, False),
    (torch.float16, torch.float16, False),
    (torch.float32, torch.float16, False),
    (torch.float32, torch.float16, True),
]


def accumulate(
    acc_dtype: torch.dtype, summand_dtype: torch.dtype, cast: bool, n: int = 1000, value: float = 0.01
) -> float:
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
        rows.append(
            {
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
            }
        )
    return rows


class ToyModel(nn.Module):
    """The handout's ToyModel: fc1 (no bias) -> ReLU -> LayerNorm -> fc2 (no bias)."""

    def __init__(self, in_features: int = 16, out_features: int = 5):
        super().__init__()
        self.fc1 = nn.Linear(in_features, 10, bias=False)
        self.ln = nn.LayerNorm(10)
        self.fc2 = nn.Linear(10, out_features, bias=False)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.fc2(self.ln(self.relu(self.fc1(x))))


def observe_autocast(dtype: torch.dtype, device: torch.device) -> dict[str, str]:
    """Run one forward/backward under autocast and read the dtypes off hooks and .grad."""
    torch.manual_seed(0)
    model = ToyModel().to(device)
    seen = {}

    def record(name):
        def hook(module, inputs, output):  # returns None, so the output is left as it is
            seen.setdefault(name, output.dtype)

        return hook

    model.fc1.register_forward_hook(record("fc1 output"))
    model.ln.register_forward_hook(record("LayerNorm output"))
    x = torch.randn(8, 16, device=device)
    targets = torch.randint(0, 5, (8,), device=device)
    with torch.autocast(device_type=device.type, dtype=dtype):
        seen["model parameters"] = next(model.parameters()).dtype
        logits = model(x)
        seen["logits"] = logits.dtype
        loss = nn.functional.cross_entropy(logits, targets)
        seen["loss"] = loss.dtype
    loss.backward()
    seen["gradients"] = model.fc1.weight.grad.dtype
    order = ["model parameters", "fc1 output", "LayerNorm output", "logits", "loss", "gradients"]
    return {k: str(seen[k]).removeprefix("torch.") for k in order}


def autocast_rows(device: torch.device) -> list[dict]:
    env = fingerprint(device)
    rows = []
    for name, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
        base = {"study": "autocast", "autocast_dtype": name, "device": device.type}
        try:
            observed = observe_autocast(dtype, device)
        except RuntimeError as error:  # a device whose autocast lacks this dtype
            rows.append(
                {**base, "tensor": "", "dtype": "", "status": "skipped", "note": str(error).splitlines()[0], **env}
            )
            continue
        rows += [{**base, "tensor": k, "dtype": v, "status": "ok", "note": "", **env} for k, v in observed.items()]
    return rows


def layernorm_rows(d: int = 4096) -> list[dict]:
    """Mean of squares and RMS-normalized output of rows of size d, in fp16, bf16 and fp32, vs float64.

    Large activations overflow fp16's sum of squares (max 65504); tiny ones underflow their squares
    (smallest fp16 subnormal 6e-8), so 1/rms blows up; bf16 has fp32's range but 8 bits of mantissa.
    No eps, so the statistic alone decides the output.
    """
    env = fingerprint(torch.device("cpu"))
    rows = []
    generator = torch.Generator().manual_seed(0)
    base = torch.randn(d, generator=generator, dtype=torch.float64)
    for scale in (1e-4, 1.0, 300.0):
        x64 = base * scale
        ms64 = (x64 * x64).mean()
        out64 = x64 / torch.sqrt(ms64)
        for name, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16), ("fp32", torch.float32)):
            x = x64.to(dtype)
            ms = (x * x).mean()  # the statistic computed in that dtype, as a kernel without upcasting would
            out = x / torch.sqrt(ms)
            finite = bool(torch.isfinite(out).all())
            rows.append(
                {
                    "study": "layernorm",
                    "dtype": name,
                    "scale": scale,
                    "d": d,
                    "mean_square": ms.item(),
                    "mean_square_float64": ms64.item(),
                    "mean_square_rel_error": abs(ms.item() - ms64.item()) / ms64.item(),
                    "output_finite": finite,
                    "output_rel_error": ((out.double() - out64).norm() / out64.norm()).item()
                    if finite
                    else float("nan"),
                    "status": "ok",
                    "note": "",
                    **env,
                }
            )
    return rows


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("experiment", choices=grid.PRECISION_EXPERIMENTS)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    if args.experiment == "accumulation":
        rows = accumulation_rows()
    elif args.experiment == "autocast":
        rows = autocast_rows(torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    else:
        rows = layernorm_rows()
    write_rows(rows, args.out)


if __name__ == "__main__":
    run_study(main)
