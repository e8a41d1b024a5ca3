from harness.run.memory import staircase

MiB = 2**20


def timeline(lengths, metric_values, metric="cuda_reserved_bytes"):
    return [{"step": i + 1, "seq_len": n, metric: v} for i, (n, v) in enumerate(zip(lengths, metric_values))]


def test_reserved_memory_rising_with_each_new_longest_batch_is_a_staircase():
    result = staircase(
        timeline([128, 256, 384, 512, 640], [1000 * MiB, 1200 * MiB, 1400 * MiB, 1600 * MiB, 1800 * MiB])
    )
    assert result["flag"] and result["metric"] == "cuda_reserved_bytes"
    assert [r["step"] for r in result["rises"]] == [2, 3, 4, 5]
    assert result["growth_bytes"] == 800 * MiB


def test_flat_memory_or_growth_unrelated_to_length_is_not():
    assert not staircase(timeline([512] * 6, [1000 * MiB] * 6))["flag"]
    # rises while lengths do not set new maxima (a leak, not the staircase)
    assert not staircase(
        timeline([512, 256, 256, 256, 256], [1000 * MiB, 1100 * MiB, 1200 * MiB, 1300 * MiB, 1400 * MiB])
    )["flag"]
    # two rises are not enough
    assert not staircase(timeline([128, 256, 512], [1000 * MiB, 1100 * MiB, 1200 * MiB]))["flag"]
    # jitter below 1 MiB is not a rise
    assert (
        staircase(timeline([1, 2, 3, 4], [100 * MiB, 100 * MiB + 1000, 100 * MiB + 2000, 100 * MiB + 3000]))["rises"]
        == []
    )


def test_cpu_timelines_use_peak_rss():
    result = staircase(timeline([1, 2, 3, 4], [100 * MiB, 120 * MiB, 140 * MiB, 160 * MiB], metric="peak_rss_bytes"))
    assert result["metric"] == "peak_rss_bytes" and result["flag"]
    assert staircase([]) is None
