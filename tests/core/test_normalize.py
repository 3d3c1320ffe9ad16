import multiprocessing as mp

import numpy as np
import pytest

import rlf
from rlf.nn.normalize import RunningNormalizer


def test_exported_lazily_from_rlf():
    assert rlf.RunningNormalizer is RunningNormalizer


def test_before_any_update_it_is_the_clipped_identity():
    norm = RunningNormalizer(clip=5.0)
    assert norm.count == 0
    np.testing.assert_allclose(norm.normalize(np.array([0.5, -2.0, 40.0])), [0.5, -2.0, 5.0])
    np.testing.assert_allclose(norm.denormalize(np.array([0.5, -2.0])), [0.5, -2.0])


def test_batched_updates_match_the_statistics_of_all_data():
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, size=(n, 3)) for n in (1, 7, 100, 2, 50)]
    norm = RunningNormalizer((3,), clip=None)
    for batch in batches:
        norm.update(batch)
    data = np.concatenate(batches)
    assert norm.count == len(data)
    np.testing.assert_allclose(norm.mean, data.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(norm.var, data.var(axis=0), rtol=1e-10)
    np.testing.assert_allclose(norm.normalize(data), (data - data.mean(0)) / data.std(0), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(norm.denormalize(norm.normalize(data)), data, rtol=1e-10)


def test_leading_axes_are_all_batch_axes():
    norm = RunningNormalizer((2,), clip=None)
    data = np.arange(24, dtype=np.float32).reshape(3, 4, 2)
    norm.update(data)
    assert norm.count == 12
    np.testing.assert_allclose(norm.mean, data.reshape(-1, 2).mean(0))
    assert norm.normalize(data).dtype == np.float32
    assert norm.normalize(np.arange(2)).dtype == np.float64


def test_clip_bounds_the_output_and_min_std_guards_a_constant_stream():
    norm = RunningNormalizer(clip=3.0, min_std=0.5)
    norm.update(np.full(10, 7.0))
    assert norm.var == 0.0
    assert norm.std == 0.5
    np.testing.assert_allclose(norm.normalize(np.array([7.0, 8.0, 100.0, -100.0])), [0.0, 2.0, 3.0, -3.0])


def test_stays_finite_and_accurate_with_huge_values_and_counts():
    # A sum of squares overflows float64 here (2e6 * 1e304 > 1.8e308); Welford/Chan stays on the data scale.
    norm = RunningNormalizer(clip=None)
    rng = np.random.default_rng(1)
    for _ in range(200):
        norm.update(1e152 + 1e150 * rng.standard_normal(10_000))
    assert np.isfinite(norm.mean) and np.isfinite(norm.var)
    assert norm.mean == pytest.approx(1e152, rel=1e-4)
    assert np.sqrt(norm.var) == pytest.approx(1e150, rel=1e-2)
    # ...and a float32-range stream of large returns over millions of samples keeps its precision.
    small = RunningNormalizer(clip=None)
    for _ in range(2_000):
        small.update(np.float32(-450.0) + rng.standard_normal(1_000).astype(np.float32))
    assert small.count == 2_000_000
    assert small.mean == pytest.approx(-450.0, abs=0.01)
    assert np.sqrt(small.var) == pytest.approx(1.0, rel=0.01)


def test_non_finite_input_is_refused_and_leaves_the_statistics_alone():
    norm = RunningNormalizer()
    norm.update(np.array([1.0, 2.0]))
    before = norm.state_dict()
    with pytest.raises(ValueError, match="NaN or infinite"):
        norm.update(np.array([1.0, np.inf]))
    with pytest.raises(ValueError, match="NaN or infinite"):
        norm.update(np.array([np.nan]))
    after = norm.state_dict()
    assert after["count"] == before["count"]
    np.testing.assert_array_equal(after["mean"], before["mean"])
    np.testing.assert_array_equal(after["m2"], before["m2"])


def test_empty_batch_is_a_no_op():
    norm = RunningNormalizer((2,))
    norm.update(np.zeros((0, 2)))
    assert norm.count == 0


def test_state_dict_round_trip_writes_in_place():
    norm = RunningNormalizer((2,))
    norm.update(np.random.default_rng(2).normal(size=(20, 2)))
    buffer = np.zeros(RunningNormalizer.buffer_size((2,)))
    other = RunningNormalizer((2,), buffer=buffer)
    other.load_state_dict(norm.state_dict())
    assert other.buffer is buffer
    assert other.count == norm.count
    np.testing.assert_array_equal(other.mean, norm.mean)
    np.testing.assert_array_equal(other.std, norm.std)
    with pytest.raises(ValueError, match="shape"):
        RunningNormalizer((3,)).load_state_dict(norm.state_dict())


def test_state_survives_an_rlf_checkpoint_file(tmp_path):
    from rlf.storage import checkpoint  # a submodule: not an attribute of rlf until imported

    norm = RunningNormalizer()
    norm.update(np.array([1.0, 2.0, 6.0]))
    checkpoint.save(tmp_path / "n.rlf", {"norm": norm.state_dict()})
    again = RunningNormalizer()
    again.load_state_dict(checkpoint.load(tmp_path / "n.rlf")["norm"])
    assert again.count == 3 and again.mean == norm.mean and again.var == norm.var


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="buffer"):
        RunningNormalizer((2,), buffer=np.zeros(3, dtype=np.float32))
    with pytest.raises(ValueError, match="clip"):
        RunningNormalizer(clip=0.0)
    with pytest.raises(ValueError, match="min_std"):
        RunningNormalizer(min_std=0.0)
    for window in (0, -5, 2.5):
        with pytest.raises(ValueError, match="window must be a positive number of samples"):
            RunningNormalizer(window=window)


def test_a_window_averages_exactly_until_full_then_each_batch_weighs_its_share():
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, size=128) for _ in range(4)]
    norm = RunningNormalizer(clip=None, window=512)
    for batch in batches:
        norm.update(batch)
    data = np.concatenate(batches)  # exactly full: the plain statistics of everything
    assert norm.count == 512
    np.testing.assert_allclose([norm.mean, norm.var], [data.mean(), data.var()], rtol=1e-12)
    # past it, the new batch weighs 128 / 512 and the old window 3/4: an exponential moving mean
    # and variance, with the spread between the two means added as in any mixture
    new = rng.normal(-5.0, 0.5, size=128)
    norm.update(new)
    w = 0.25
    mixed_mean = (1 - w) * data.mean() + w * new.mean()
    mixed_var = (1 - w) * data.var() + w * new.var() + w * (1 - w) * (new.mean() - data.mean()) ** 2
    assert norm.count == 512
    np.testing.assert_allclose([norm.mean, norm.var], [mixed_mean, mixed_var], rtol=1e-12)


def test_a_window_forgets_an_old_regime_and_a_batch_larger_than_it_replaces_everything():
    rng = np.random.default_rng(1)
    forgetful, total = RunningNormalizer(clip=None, window=1000), RunningNormalizer(clip=None)
    for norm in (forgetful, total):
        norm.update(rng.normal(0.0, 100.0, size=5000))  # a loud start ...
    for _ in range(50):
        quiet = rng.normal(10.0, 1.0, size=200)  # ... then 10,000 quiet samples
        forgetful.update(quiet)
        total.update(quiet)
    assert float(forgetful.std) == pytest.approx(1.0, rel=0.1) and float(forgetful.mean) == pytest.approx(10, abs=0.2)
    assert float(total.std) > 30  # without a window the loud start still dominates
    big = rng.normal(7.0, 3.0, size=3000)
    forgetful.update(big)
    np.testing.assert_allclose([forgetful.mean, forgetful.var], [big.mean(), big.var()], rtol=1e-12)
    fresh = RunningNormalizer(clip=None, window=10)
    fresh.update(big)  # even on a first update: no division by the empty count
    assert np.isfinite(fresh.var) and float(fresh.mean) == pytest.approx(big.mean())


def _update_shared(buffer, lock, seed):
    norm = RunningNormalizer(buffer=np.frombuffer(buffer.get_obj(), dtype=np.float64))
    for value in np.random.default_rng(seed).normal(5.0, 1.0, size=(20, 50)):
        with lock:
            norm.update(value)


def test_a_shared_buffer_gives_processes_one_set_of_statistics():
    ctx = mp.get_context("fork")
    shared = ctx.Array("d", RunningNormalizer.buffer_size())
    lock = ctx.Lock()
    workers = [ctx.Process(target=_update_shared, args=(shared, lock, seed)) for seed in (1, 2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=30)
        assert worker.exitcode == 0
    norm = RunningNormalizer(buffer=np.frombuffer(shared.get_obj(), dtype=np.float64))
    data = np.concatenate([np.random.default_rng(s).normal(5.0, 1.0, size=(20, 50)).ravel() for s in (1, 2)])
    assert norm.count == 2000
    assert norm.mean == pytest.approx(data.mean(), rel=1e-9)
    assert norm.var == pytest.approx(data.var(), rel=1e-9)
