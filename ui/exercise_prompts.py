"""The prompts of the block exercises (practice.kinds.blocks): text, and the table they read."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from practice.core import Exercise
from ui.i18n import t

BLOCK_KINDS = ("attn_output", "weight_matrix", "ln_placement", "ffn", "kv_cache")


def _num(x: float) -> str:
    return f"{x:g}"


def _vec(xs) -> str:
    return "[" + ", ".join(_num(x) for x in xs) + "]"


def show_block_prompt(ex: Exercise) -> bool:
    """Draw the prompt of a block exercise; False for any other kind (the page draws it)."""
    d, k = ex.data, ex.kind
    if k not in BLOCK_KINDS:
        return False
    if k == "attn_output":
        n, d_v = len(d["values"]), len(d["values"][0])
        st.markdown(t(ex.prompt_key, n=n, w=_vec(d["weights"]), d=d_v))
        frame = pd.DataFrame(
            {
                t("practice.attn_output.col.token"): list(range(1, n + 1)),
                t("practice.attn_output.col.weight"): [f"{w:.2f}" for w in d["weights"]],
                t("practice.attn_output.col.value"): [_vec(value) for value in d["values"]],
            }
        )
        st.dataframe(frame, hide_index=True)
    elif k == "weight_matrix":
        st.markdown(t(ex.prompt_key))
        n = len(d["scores"])
        masked = t("practice.weight_matrix.masked")
        frame = pd.DataFrame(
            [
                [_num(s) if ok else masked for s, ok in zip(row, allowed)]
                for row, allowed in zip(d["scores"], d["allowed"])
            ],
            index=[f"{t('practice.weight_matrix.col.query')} {i + 1}" for i in range(n)],
            columns=[f"k{j + 1}" for j in range(n)],
        )
        st.dataframe(frame)
    elif k == "ln_placement":
        st.markdown(t(ex.prompt_key, x=_vec(d["x"]), w=_vec(d["w"]), d=len(d["x"])))
    elif k == "ffn":
        st.markdown(
            t(
                ex.prompt_key,
                d_model=d["d_model"],
                d_ff=d["d_ff"],
                mult=d["mult"],
                b=d["b"],
                l=d["l"],
            )
        )
    elif k == "kv_cache":
        st.markdown(
            t(
                ex.prompt_key,
                **{
                    key: d[key]
                    for key in (
                        "layers",
                        "n_heads",
                        "n_kv_heads",
                        "d_head",
                        "tokens",
                        "batch",
                        "dtype",
                        "size",
                    )
                },
            )
        )
    return True
