"""What views derive from traces, kept with the trace it came from: merged and hidden
traces, rollouts, overviews, statistics tables (model.analysis.view), in the lab's one
byte-bounded cache (model.runtime.kept.ByteLRU). They go when their trace is collected."""

from __future__ import annotations

from model.runtime.kept import ByteLRU, budget_bytes

KEPT_CACHE_ENV = "ATTENTION_LAB_KEPT_CACHE_MB"
# All traces together: a long input's rollout is 64 MB a layer at 4,096 tokens, an
# overview 256 KB, a statistics table a few KB.
DEFAULT_KEPT_CACHE_MB = 1024
KEPT = ByteLRU(budget_bytes(KEPT_CACHE_ENV, DEFAULT_KEPT_CACHE_MB))
