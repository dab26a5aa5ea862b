"""lmperf: where a Transformer language model spends GPU time and memory.

CUDA's caching allocator runs with expandable segments, as torchtitan runs it, unless the user's
PYTORCH_CUDA_ALLOC_CONF says otherwise. With fixed segments, the blocks that launched steps leave
cached beside the optimizer state cannot go back to the device, and a CUDA graph's private pool
cannot use them: at 2.7B, context 1024, 10 GiB stayed stranded and the train step could not be
captured (nor could naive attention's be launched). Set before torch allocates anything.
"""

import os

os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
