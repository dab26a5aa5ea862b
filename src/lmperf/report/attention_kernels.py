"""Which attention kernels a study's rows ran, as a sentence the FlashAttention, ladder and e2e
sections share: our FlashAttention runs its Triton kernels, or on an sm_90 GPU the Gluon kernels
where they take the shape, and each row says which (``attention_kernel``)."""

from collections.abc import Callable

import pandas as pd


def shown(kernels: str) -> str:
    """A row's ``attention_kernel`` for a sentence: 'gluon forward, triton backward' -> 'Gluon forward,
    Triton backward'."""
    return kernels.replace("gluon", "Gluon").replace("triton", "Triton")


def kernels_sentence(rows: pd.DataFrame, who: str, at: Callable[[dict], str]) -> str:
    """ "{who} ran: Gluon." where every row ran the same kernels; else each kernel with where it ran,
    ``at(row)`` naming a row's place ("{who} ran: Gluon forward, Triton backward at seq 128, seq 256;
    Gluon at seq 32768."), in the rows' order. '' where no row names its kernels (rows written before
    the column existed)."""
    if "attention_kernel" not in rows:
        return ""
    named = rows[rows["attention_kernel"].fillna("").astype(str) != ""]
    if named.empty:
        return ""
    kernels = named.groupby("attention_kernel", sort=False)
    if kernels.ngroups == 1:
        return f"{who} ran: {shown(named['attention_kernel'].iloc[0])}."
    places = [
        f"{shown(kernel)} at {', '.join(dict.fromkeys(at(row) for row in group.to_dict('records')))}"
        for kernel, group in kernels
    ]
    return f"{who} ran: {'; '.join(places)}."
