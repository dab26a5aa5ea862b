"""lmperf: where a Transformer language model spends GPU time and memory."""
