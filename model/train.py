"""``python -m model.train``: train a toy Transformer on one task and write a checkpoint folder.

    python -m model.train --task en2ko --out assets/checkpoints/en2ko [--steps 3000 ...]
    torchrun --nproc_per_node=2 -m model.train --task sort --out /tmp/sort   # DDP

A thin command line; the recipe, TrainConfig and the loop live in ``model.training``.
"""

from model.training.trainer import main

if __name__ == "__main__":
    main()
