"""The report's "Data parallel training", "Optimizer state sharding" and "Communication accounting"
sections, from results/ddp_train.csv, results/ddp/sharding.csv and lmperf.distributed.accounting."""

import pandas as pd

from lmperf.distributed.accounting import (
    GB, FFNStack, Mesh, compute_bound_batch, devices_needed, fsdp_bytes_per_device, smallest_fsdp,
)
from lmperf.distributed.bucket_model import optimal_bucket_bytes
from lmperf.report.comm_section import fits
from lmperf.report.markdown import num, ok, pct, table

OVERLAPPED = ("individual", "bucketed-1", "bucketed-10", "bucketed-100", "bucketed-1000")


def exposed(train: pd.DataFrame) -> pd.DataFrame:
    """Per global batch: each variant's exposed communication (step - local) and its hidden share."""
    out = []
    for batch, group in ok(train).groupby("global_batch"):
        by = group.set_index("variant")
        local = by["step_ms"].get("local")
        naive = by["step_ms"].get("naive")
        for variant, row in by.iterrows():
            extra = row["step_ms"] - local if local is not None else float("nan")
            naive_comm = naive - local if naive is not None and local is not None else float("nan")
            out.append({**row.to_dict(), "variant": variant, "global_batch": batch, "exposed_ms": extra,
                        "comm_share": extra / row["step_ms"],
                        "hidden": 1 - extra / naive_comm if variant != "local" else float("nan")})
    return pd.DataFrame(out)


def predicted_bucket_mb(allreduce: pd.DataFrame | None, backend: str, world: int, grad_bytes: float) -> float | None:
    """The bucket model's optimum (lmperf.distributed.bucket_model) from this backend's all-reduce fit."""
    if allreduce is None or ok(allreduce).empty:
        return None
    fitted = fits(ok(allreduce))
    match = fitted[(fitted["backend"] == backend) & (fitted["world_size"] == world)]
    if match.empty or match["o_s"].iloc[0] <= 0:
        return None
    return optimal_bucket_bytes(grad_bytes, match["o_s"].iloc[0], match["w_bytes_per_s"].iloc[0]) / 2**20


def render_training(train: pd.DataFrame, allreduce: pd.DataFrame | None = None) -> list[str]:
    out = ["## Data parallel training", ""]
    rows = exposed(train)
    if rows.empty:
        return out + ["No data-parallel rows were measured.", ""]
    first = rows.iloc[0]
    out += [
        f"{first['size']} model, context {int(first['context_length'])}, {int(first['world_size'])} ranks over "
        f"{first['backend']} ({first['device_name']}), fp32, {int(first['warmup'])} warm-up and {int(first['steps'])} "
        "timed steps, each step's time the slowest rank's. `local` is the same step with no gradient "
        "synchronization: exposed communication = step − local; hidden = 1 − exposed / exposed(naive). "
        "`sync` is the time from the end of backward to the end of "
        "`finish_gradient_synchronization()` (CUDA events on GPU, host clock on CPU).", "",
    ]
    for batch, group in rows.groupby("global_batch"):
        order = {v: i for i, v in enumerate(("local", "naive", "flat", "individual", "bucketed-1", "bucketed-10",
                                             "bucketed-100", "bucketed-1000", "torch_ddp"))}
        group = group.sort_values("variant", key=lambda c: c.map(order))
        out += [f"### Global batch {batch}", "", table(pd.DataFrame({
            "variant": group["variant"], "step (ms)": group["step_ms"].map(num),
            "std (ms)": group["step_std_ms"].map(num), "sync (ms)": group["sync_ms"].map(num),
            "exposed comm (ms)": group["exposed_ms"].map(num), "comm share": group["comm_share"].map(pct),
            "hidden vs naive": group["hidden"].map(pct),
        })), ""]
        by = group.set_index("variant")
        if "torch_ddp" in by.index and any(v in by.index for v in OVERLAPPED if v.startswith("bucketed")):
            bucketed = by[by.index.str.startswith("bucketed")]
            best = bucketed["step_ms"].idxmin()
            gap = by.loc[best, "step_ms"] / by.loc["torch_ddp", "step_ms"] - 1
            out.append(f"- Fastest bucketed variant: **{best}** at {num(by.loc[best, 'step_ms'])} ms, "
                       f"{pct(gap, 1)} against torch DDP's {num(by.loc['torch_ddp', 'step_ms'])} ms "
                       f"(bar: within 3%: **{'met' if abs(gap) <= 0.03 or gap < 0 else 'not met'}**).")
            predicted = predicted_bucket_mb(allreduce, by["backend"].iloc[0], int(by["world_size"].iloc[0]),
                                            by["grad_mib"].iloc[0] * 2**20)
            if predicted is not None:
                out.append(f"- The bucket model fitted to the all-reduce sweep (Communication) puts the optimum at "
                           f"{num(predicted, 0)} MB; the fastest measured bucket size is {best.split('-')[1]} MB.")
        hidden = by.loc[[v for v in OVERLAPPED if v in by.index], "hidden"]
        if len(hidden):
            worst = hidden.idxmin()
            out.append(f"- Overlapped variants hide {pct(hidden.min())} ({worst}) to {pct(hidden.max())} "
                       f"({hidden.idxmax()}) of the naive variant's {num(by.loc['naive', 'exposed_ms'])} ms of "
                       f"communication (bar: ≥ 80% each: **{'met' if hidden.min() >= 0.8 else 'not met'}**).")
        if "individual" in by.index and "sync_ms" in by:
            ind = by.loc["individual"]
            out.append(f"- Per-parameter overlap leaves {num(ind['sync_ms'])} ms of waiting after backward, yet its step is "
                       f"{num(ind['exposed_ms'])} ms slower than local: the other {num(ind['exposed_ms'] - ind['sync_ms'])} ms "
                       "is backward itself running slower next to the NCCL kernels and the gradient hooks.")
        noise = group["step_std_ms"].max()
        if "naive" in by.index and noise > by.loc["naive", "exposed_ms"] / 2:
            out.append(f"- Step-to-step noise (std up to {num(noise)} ms) is more than half the naive variant's "
                       f"communication ({num(by.loc['naive', 'exposed_ms'])} ms): at this batch the differences between "
                       "variants are not resolved.")
        if "naive" in by.index and "flat" in by.index:
            out.append(f"- One flat all-reduce instead of one per parameter changes the synchronization from {num(by.loc['naive', 'sync_ms'])} ms to "
                       f"{num(by.loc['flat', 'sync_ms'])} ms.")
        out.append("")
    out += ["![Kernel timeline of one training step, naive vs overlapped DDP](figures/ddp_timeline.png)", ""]
    return out


def render_sharding(sharding: pd.DataFrame) -> list[str]:
    out = ["## Optimizer state sharding", ""]
    rows = ok(sharding)
    if len(rows) < 2:
        reasons = "; ".join(sharding["note"].dropna().astype(str))
        return out + [f"Not measured: {reasons or 'no rows'}.", ""]
    by = rows.set_index(rows["sharded"].astype(str).str.lower().map({"true": "sharded", "false": "unsharded"}))
    first = rows.iloc[0]
    out += [
        f"{first['size']} model, {int(first['world_size'])} ranks, torch.optim.AdamW; gradients synchronized by "
        "DDPIndividualParameters (no buffers of its own), so the runs differ only in where the optimizer "
        "state lives. Memory is rank 0's allocator, in MiB.", "",
        table(pd.DataFrame({
            "": by.index, "parameters": by["param_mib"].map(lambda x: num(x, 0)),
            "gradients": by["grad_mib"].map(lambda x: num(x, 0)),
            "optimizer state": by["optimizer_state_mib"].map(lambda x: num(x, 0)),
            "peak after construction": by["peak_after_build_mib"].map(lambda x: num(x, 0)),
            "allocated before step": by["allocated_before_step_mib"].map(lambda x: num(x, 0)),
            "allocated after step": by["allocated_after_step_mib"].map(lambda x: num(x, 0)),
            "peak during step": by["peak_during_step_mib"].map(lambda x: num(x, 0)),
            "step (ms)": by["step_ms"].map(num),
        })), "",
    ]
    should = by.loc["unsharded", "optimizer_state_mib"] - by.loc["sharded", "optimizer_state_mib"]
    saved = by.loc["unsharded", "allocated_after_step_mib"] - by.loc["sharded", "allocated_after_step_mib"]
    budget = by.loc["unsharded", ["param_mib", "grad_mib", "optimizer_state_mib"]].sum()
    out += [
        f"- Computed breakdown, unsharded: parameters + gradients + AdamW state = {num(budget, 0)} MiB against "
        f"{num(by.loc['unsharded', 'allocated_after_step_mib'], 0)} MiB allocated after the step.",
        f"- Sharding should remove {num(should, 0)} MiB of optimizer state per rank; memory after the step is "
        f"{num(saved, 0)} MiB lower, **{pct(saved / should)}** of it (bar: ≥ 90%: **{'met' if saved >= 0.9 * should else 'not met'}**). "
        f"Step time goes from {num(by.loc['unsharded', 'step_ms'])} ms to {num(by.loc['sharded', 'step_ms'])} ms: "
        + ("each rank now updates only its shard, which saves more than the parameter broadcasts cost."
           if by.loc["sharded", "step_ms"] < by.loc["unsharded", "step_ms"] else
           "the parameter broadcasts after each step cost more than updating only a shard saves."),
        "- Unlike ZeRO stage 1, gradients are still all-reduced in full (every rank holds every gradient), and "
        "updated parameters travel by one broadcast per parameter from its owner rather than one all-gather; "
        "ZeRO-1 reduce-scatters gradients so each rank receives only its shard's.", "",
    ]
    return out


def render_accounting() -> list[str]:
    model, mesh = FFNStack(), Mesh()
    state = model.state_bytes()
    total = sum(state.values())
    bound = compute_bound_batch(model, mesh)
    tokens = int(round(bound["batch_tokens"]))
    act = model.activation_bytes_per_token()
    n = smallest_fsdp(model, 95 * GB, 0)
    n_at_batch = smallest_fsdp(model, 95 * GB, tokens)
    at_batch = (f"at the {tokens:,}-token batch of (c) it takes N = {n_at_batch}" if n_at_batch else
                f"at the {tokens:,}-token batch of (c) the unsharded half of the activations alone is "
                f"{num(act * tokens / 2 / GB, 0)} GB, so no N fits without sharding or recomputing all of them")
    out = [
        "## Communication accounting (XXL, computed)", "",
        f"XXL: d_model {model.d_model}, d_ff {model.d_ff}, {model.blocks} blocks of two linear layers: "
        f"{num(model.params / 1e9, 1)} B parameters (`lmperf.distributed.accounting`).", "",
        table(pd.DataFrame({"part (fp32)": list(state), "GB": [num(b / GB, 0) for b in state.values()]})), "",
        f"- (a) Weights, gradients and AdamW state take **{num(total / GB, 0)} GB**, "
        f"{devices_needed(total, 80 * GB)} H100s (80 GB) worth. Saved for backward in bf16: each block's input and "
        f"hidden activation, {num(act / 2**20, 2)} MiB per token ({num(act * tokens / GB, 0)} GB at the "
        f"{tokens:,}-token batch of (c)).",
        f"- (b) With weights, gradients, optimizer state and half of the activations sharded over N devices, "
        f"per-device memory is (state + activations/2)/N + activations/2. The state alone fits 95 GB from "
        f"**N = {n}** ({num(fsdp_bytes_per_device(model, n, 0) / GB, 1)} GB per device); {at_batch}.",
        f"- (c) Forward pass on a TPU v5p mesh, FSDP X = {mesh.x}, TP Y = {mesh.y}, M_X = {mesh.m_x}, M_Y = {mesh.m_y}, "
        f"C = {mesh.c:.2e} FLOP/s, W_ici = {mesh.w_ici:.2e} B/s (α = C/W = {num(bound['alpha'], 0)}): compute-bound "
        f"needs B ≥ X·α/M_X = **{tokens:,} tokens** overall, **{num(bound['per_device_tokens'], 0)} per device**; "
        f"the TP condition d_ff ≥ Y·α/M_Y = {num(bound['tp_condition_d_ff'], 0)} "
        f"{'holds' if bound['tp_bound_ok'] else 'fails'} for d_ff = {model.d_ff}.",
        "- (d) To keep the batch small without becoming communication-bound: overlap the FSDP weight gathers "
        "with the previous layer's compute (prefetching), use pipeline parallelism across nodes so each "
        "device holds fewer layers, communicate in lower precision, and use faster links for the "
        "bandwidth-hungry axis (tensor parallelism inside an NVLink/ICI domain).", "",
    ]
    return out


def render(train: pd.DataFrame, sharding: pd.DataFrame, allreduce: pd.DataFrame | None = None) -> str:
    return "\n".join(render_training(train, allreduce) + render_sharding(sharding) + render_accounting())
