"""Every tensor a module holds, to prove a forward pass left nothing behind on a shared model."""

from __future__ import annotations

import torch


def tensor_state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Every tensor a module holds: parameters, buffers, and any tensor attribute at all
    (``self.attn = weights`` would show up here), cloned."""
    found = {name: t.detach().clone() for name, t in module.state_dict().items()}
    for prefix, m in module.named_modules():
        for attr, value in vars(m).items():
            values = value if isinstance(value, list | tuple) else [value]
            for i, v in enumerate(values):
                if isinstance(v, torch.Tensor):
                    found[f"{prefix}.{attr}[{i}]"] = v.detach().clone()
    return found


def assert_same_tensors(before: dict, after: dict) -> None:
    assert sorted(after) == sorted(before), "a forward pass left a tensor on the module"
    for name, tensor in before.items():
        assert torch.equal(after[name], tensor), f"{name} changed during a forward pass"
