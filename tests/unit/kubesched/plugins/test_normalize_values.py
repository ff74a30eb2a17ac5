"""default_normalize_values (the runtime's batch normalisation) gives default_normalize_score's
scores on every input."""

import random

import pytest

from kubesched.framework.interface import NodeScore
from kubesched.plugins.helper.normalize_score import default_normalize_score, default_normalize_values


@pytest.mark.parametrize("reverse", [False, True])
def test_batch_normalisation_equals_the_per_node_one(reverse):
    rng = random.Random(3)
    cases = [[], [0], [0, 0, 0], [5], [1, 2, 3], [-4, -1], [-3, 0, 7]]
    cases += [[rng.randint(0, rng.choice([1, 3, 100, 10_000])) for _unused in range(rng.randint(1, 40))]
              for _unused in range(300)]
    for values in cases:
        scores = [NodeScore(f"n{i}", v) for i, v in enumerate(values)]
        default_normalize_score(100, reverse, scores)
        assert default_normalize_values(100, reverse, list(values)) == [s.score for s in scores], values
