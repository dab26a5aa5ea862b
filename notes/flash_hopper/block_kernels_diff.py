"""Compare the per-step kernel times that block_kernels.py wrote for two arms, one JSON file each:
every kernel's time per step in both, sorted by the difference.

Ran at: 131ab02f8450 (on block_kernels.py's JSON files), output:
    notes/flash_hopper/logs/2026-11-26-block_kernels_diff-large-131ab02.txt

    python notes/flash_hopper/block_kernels_diff.py OURS.json SDPA.json
"""

import json
import sys
from pathlib import Path


def main() -> None:
    (a_name, (a, a_calls)), (b_name, (b, b_calls)) = (
        next(iter(json.loads(Path(f).read_text()).items())) for f in sys.argv[1:3]
    )
    print(f"{a_name}: {sum(a.values()):.1f} us of kernels a step; {b_name}: {sum(b.values()):.1f}")
    print(f"{a_name[:9]:>9} {b_name[:9]:>9} {'diff':>8} {'calls':>9}  kernel")
    for k in sorted(set(a) | set(b), key=lambda k: -abs(a.get(k, 0) - b.get(k, 0)))[:30]:
        calls = f"{a_calls.get(k, 0):4.0f}/{b_calls.get(k, 0):<4.0f}"
        print(f"{a.get(k, 0):9.1f} {b.get(k, 0):9.1f} {a.get(k, 0) - b.get(k, 0):8.1f} {calls}  {k[:110]}")


if __name__ == "__main__":
    main()
