"""Summaries of repeated runs: mean ± std over seeds, and the paired difference of two columns (same seeds) with a
95% t interval. One home for the interval: the main job's learning curves and the benchmark tables both use it."""

from __future__ import annotations

import statistics

from scipy.stats import t as student_t  # scipy comes with scikit-learn

__all__ = ["mean_std", "paired_difference", "repeated_seeds"]


def mean_std(values, digits: int = 2):
    """`{"mean", "std", "n"}` of `values` (std 0.0 for one value); None for none."""
    if not values:
        return None
    return {"mean": round(statistics.mean(values), digits),
            "std": round(statistics.stdev(values), digits) if len(values) > 1 else 0.0, "n": len(values)}


def repeated_seeds(runs: list) -> list:
    """The seeds that more than one of `runs` (each a dict with "seed") ran, sorted."""
    seeds = [r["seed"] for r in runs]
    return sorted({seed for seed in seeds if seeds.count(seed) > 1})


def paired_difference(runs_a: list, runs_b: list, key: str) -> dict | None:
    """Column a minus column b on the seeds both ran (each run a dict with "seed" and `key`; a seed gives both
    columns the same data and batch order): mean and std of the per-seed differences, a 95% t interval of the mean
    (from two seeds on), on how many seeds a is higher or lower, and the seeds only one column ran ("unpaired", where
    there are some: left out of the pairs). None when no seed is shared; ValueError when a column holds two runs of
    one seed (which one would pair is arbitrary)."""
    for name, runs in (("a", runs_a), ("b", runs_b)):
        if twice := repeated_seeds(runs):
            raise ValueError(f"paired_difference: column {name} holds two runs of seed(s) {twice}; "
                             "pairs need one run a seed")
    a, b = {r["seed"]: r[key] for r in runs_a}, {r["seed"]: r[key] for r in runs_b}
    seeds = sorted(set(a) & set(b))
    if not seeds:
        return None
    diffs = [a[s] - b[s] for s in seeds]
    mean = statistics.mean(diffs)
    entry = {"seeds": seeds, "mean": round(mean, 2), "higher_on": sum(d > 0 for d in diffs),
             "lower_on": sum(d < 0 for d in diffs)}
    if set(a) != set(b):
        entry["unpaired"] = {"a": sorted(set(a) - set(b)), "b": sorted(set(b) - set(a))}
    if len(diffs) > 1:
        std = statistics.stdev(diffs)
        df = len(diffs) - 1
        half = student_t.ppf(0.975, df) * std / len(diffs) ** 0.5
        entry.update(std=round(std, 2), ci95=[round(mean - half, 2), round(mean + half, 2)])
    return entry
