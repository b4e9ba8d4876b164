"""Training: the paper's recipe (``trainer`` with its TrainConfig), held-out evaluation, the
live background run of the browser's "train your own", and the experiments: warm-up, and
length generalisation with each position scheme (``lengths``)."""
