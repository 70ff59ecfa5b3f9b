"""Aligned fills (``scaler.aligned``): the fill made a step of several pods at a time is the one
a pod-at-a-time loop makes (written here afresh); it fits its node, takes no more pods than
are left or than ``per_node``, and leaves no room a pod left would fit; a fill answered from
the last one is the fill made afresh."""

from __future__ import annotations

import random

from nodemanager.scaler.aligned import AlignedFills

DIMS = (0, 1)  # cpu, memory; index 2 counts pods


def _one_at_a_time(allocatable: tuple[int, ...], requests: list[tuple[int, ...]], remaining: list[int], per_node: int | None) -> tuple[int, ...]:
    free, counts = list(allocatable), [0] * len(requests)
    while per_node is None or sum(counts) < per_node:
        best, best_score = -1, -1.0
        for i, request in enumerate(requests):
            if counts[i] < remaining[i] and all(need <= have for need, have in zip(request, free, strict=True)):
                score = sum(request[j] / allocatable[j] * free[j] / allocatable[j] for j in DIMS)
                if score > best_score:
                    best, best_score = i, score
        if best < 0:
            return tuple(counts)
        counts[best] += 1
        free = [have - need for have, need in zip(free, requests[best], strict=True)]
    return tuple(counts)


def _case(rng: random.Random) -> tuple[tuple[int, ...], list[tuple[int, ...]], list[int], int | None]:
    allocatable = (rng.randint(2_000, 96_000), rng.randint(4, 384) * 2**30, rng.choice([29, 58, 110, 234]))
    requests = [(rng.randint(50, 8_000), rng.randint(64, 16_384) * 2**20, 1) for _ in range(rng.randint(1, 12))]
    remaining = [rng.randint(0, 40) for _ in requests]
    return allocatable, requests, remaining, rng.choice([None, None, 1, 3])


def test_a_fill_is_the_one_a_pod_at_a_time_loop_makes() -> None:
    rng = random.Random(7)
    for _ in range(400):
        allocatable, requests, remaining, per_node = _case(rng)
        fill = AlignedFills(requests, DIMS).fill(allocatable, remaining, per_node)
        assert fill == _one_at_a_time(allocatable, requests, remaining, per_node)
        used = [sum(k * r[j] for k, r in zip(fill, requests, strict=True)) for j in range(3)]
        assert all(u <= a for u, a in zip(used, allocatable, strict=True))
        assert all(k <= left for k, left in zip(fill, remaining, strict=True))
        if per_node is None or sum(fill) < per_node:  # full: no pod left fits the room left
            free = [a - u for a, u in zip(allocatable, used, strict=True)]
            assert not any(k < left and all(n <= f for n, f in zip(r, free, strict=True)) for k, left, r in zip(fill, remaining, requests, strict=True))


def test_a_fill_answered_from_the_last_one_is_the_fill_made_afresh() -> None:
    rng = random.Random(11)
    for _ in range(100):
        allocatable, requests, remaining, per_node = _case(rng)
        kept = AlignedFills(requests, DIMS)
        other = (allocatable[0] // 2, allocatable[1] // 2, allocatable[2])
        for _ in range(8):  # pods taken as a packer takes them: by fills of this node and another
            assert kept.fill(allocatable, remaining, per_node) == AlignedFills(requests, DIMS).fill(allocatable, remaining, per_node)
            taken = kept.fill(other if rng.random() < 0.5 else allocatable, remaining, per_node)
            if rng.random() < 0.3:  # a class no fill took runs out too
                i = rng.randrange(len(remaining))
                taken = tuple(k if j != i else remaining[i] for j, k in enumerate(taken))
            remaining = [left - k for left, k in zip(remaining, taken, strict=True)]
