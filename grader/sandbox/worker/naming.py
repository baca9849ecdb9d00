"""The contract's names for a student's model: parameter aliases and dotted submodule paths.

The grading process names parameters and submodules as the contract does (``blocks.0.attn.qkv``); a
student may register blocks another way (a plain list plus ``add_module``). ``ListNames`` maps between the
two in both directions, so state_dict, describe, load and grads replies use the contract's names.
"""

from __future__ import annotations


class ListNames:
    """The contract's names for a model's parameters. Blocks kept in a plain Python list and registered
    with ``add_module`` (``self.blocks = [...]``, then ``add_module(f"block{i}", block)``) are named by
    their list path, ``blocks.0``, as an ``nn.ModuleList`` would name them."""

    def __init__(self, root):
        import torch.nn as nn

        self.aliases: dict[str, str] = {}  # registered prefix -> list path
        for prefix, module in root.named_modules():
            registered = {id(child): name for name, child in module.named_children()}
            dot = f"{prefix}." if prefix else ""
            for attr, value in vars(module).items():
                if attr.startswith("_") or not isinstance(value, (list, tuple)):
                    continue
                for i, item in enumerate(value):
                    if isinstance(item, nn.Module) and id(item) in registered:
                        self.aliases[dot + registered[id(item)]] = f"{dot}{attr}.{i}"

    @staticmethod
    def _swap(name: str, table: dict[str, str]) -> str:
        for old, new in table.items():
            if name.startswith(old + "."):
                return new + name[len(old) :]
        return name

    def contract(self, name: str) -> str:
        return self._swap(name, self.aliases)

    def actual(self, name: str) -> str:
        return self._swap(name, {v: k for k, v in self.aliases.items()})


def submodule(root, path: str):
    """The submodule at a dotted path, through attributes and list indices (``blocks.0.attn.qkv``)."""
    for part in path.split("."):
        root = root[int(part)] if part.isdigit() else getattr(root, part)
    return root
