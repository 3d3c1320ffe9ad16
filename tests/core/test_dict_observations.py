"""Dict and Tuple observations through the core: batched as a dict (tuple) of (N, ...) arrays by every core
collector, stored whole in rollouts and replay, checked when read back, and refused in one line for an
algorithm that does not declare them, for nested spaces and for multi-agent envs."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from fault_support import assert_one_line_error, make_site, rlf
from gymnasium import spaces
from support import install_fake_plugin

from rlf import EnvSpec, IncompatibleError, ReplayBuffer, observations
from rlf.envs.base import EnvFactory
from rlf.envs.collectors import make_vector_env
from rlf.envs.goal_cells import GoalCells
from rlf.finite import BadObservation, act_on
from rlf.resolution import check_compatible

GOAL_CELLS = "gym:rlf.envs.goal_cells:GoalCells-v0"


class TupleCells(gymnasium.Wrapper):
    """GoalCells with its parts as a Tuple (image, vector)."""

    def __init__(self, env):
        super().__init__(env)
        self.observation_space = spaces.Tuple((env.observation_space["image"], env.observation_space["vector"]))

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        return (obs["image"], obs["vector"]), info

    def step(self, action):
        obs, *rest = self.env.step(action)
        return ((obs["image"], obs["vector"]), *rest)


def _goal_cells(_config=None):
    return GoalCells(length=3)


def _tuple_cells(_config=None):
    return TupleCells(GoalCells(length=3))


# -- the helpers -----------------------------------------------------------------------------------
def test_helpers_treat_a_dict_a_tuple_and_an_array_alike():
    for make in (lambda a, b: {"a": a, "b": b}, lambda a, b: (a, b)):
        one = make(np.zeros((2, 3), np.uint8), np.arange(2))
        two = make(np.ones((1, 3), np.uint8), np.array([7]))
        joined = observations.concatenate([one, two])
        assert observations.rows(joined) == 3
        parts = dict(observations.leaves(joined))
        assert [p.shape for p in parts.values()] == [(3, 3), (3,)]
        assert list(parts.values())[0].dtype == np.uint8
        row = observations.index(joined, 2)
        copied = observations.copy(joined)
        observations.assign(copied, 0, row)
        assert list(dict(observations.leaves(copied)).values())[1].tolist() == [7, 1, 7]
        assert list(dict(observations.leaves(joined)).values())[1].tolist() == [0, 1, 7]  # a copy, untouched
        stacked = observations.stack([one, one])
        assert [p.shape for _, p in observations.leaves(stacked)] == [(2, 2, 3), (2, 2)]
        back = observations.unstack(stacked)
        assert len(back) == 2 and type(back[0]) is type(one)
    array = np.arange(6).reshape(3, 2)
    assert observations.index(array, 1).tolist() == [2, 3] and observations.rows(array) == 3


def test_fits_names_what_a_saved_batch_lacks():
    space = GoalCells().observation_space
    good = observations.empty(space, 2)
    assert observations.fits(space, good, 2) is None
    assert "parts" in observations.fits(space, {"image": good["image"]}, 2)
    assert "part 'vector'" in observations.fits(space, {**good, "vector": np.zeros((3, 4), np.float32)}, 2)
    assert "dict" in observations.fits(spaces.Tuple((space["image"],)), good, 2)


@pytest.mark.parametrize(("space", "fragment"), [
    (spaces.Dict({"inner": spaces.Dict({"x": spaces.Discrete(2)})}), "nested Dict/Tuple are not supported"),
    (spaces.Tuple((spaces.Text(4),)), "part 0"),
    (spaces.Text(4), "not batched by rlf"),
])
def test_unbatchable_spaces_are_named(space, fragment):
    with pytest.raises(IncompatibleError, match=fragment):
        observations.check_space(space)


# -- collectors --------------------------------------------------------------------------------------
@pytest.mark.parametrize("subprocess", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("make", [_goal_cells, _tuple_cells], ids=["dict", "tuple"])
def test_collectors_batch_parts_and_keep_the_final_observation(make, subprocess):
    envs = make_vector_env("cells", EnvFactory(make, None), 3, subprocess=subprocess)
    try:
        space = envs.spec.observation_spaces["agent"]
        obs = envs.reset(seed=3)["agent"]
        assert observations.fits(space, obs, 3) is None
        for _ in range(3):
            batch = envs.step({"agent": np.zeros(3, dtype=np.int64)})
            assert observations.fits(space, batch.obs["agent"], 3) is None
            assert observations.fits(space, batch.next_obs["agent"], 3) is None
        # the third step ends every episode: next_obs is the final observation, obs the reset one
        assert batch.ended_envs == [0, 1, 2]
        _, image = next(observations.leaves(batch.obs["agent"]))
        _, final = next(observations.leaves(batch.next_obs["agent"]))
        assert image.dtype == np.uint8 and not np.array_equal(image, final)
    finally:
        envs.close()


def test_sync_and_async_give_the_same_observations():
    runs = []
    for subprocess in (False, True):
        envs = make_vector_env("cells", EnvFactory(_goal_cells, None), 2, subprocess=subprocess)
        try:
            seen = [envs.reset(seed=11)["agent"]]
            for _ in range(4):
                batch = envs.step({"agent": np.array([1, 2])})
                seen += [batch.next_obs["agent"], batch.obs["agent"]]
        finally:
            envs.close()
        runs.append(seen)
    for a, b in zip(*runs, strict=True):
        for (_, x), (_, y) in zip(observations.leaves(a), observations.leaves(b), strict=True):
            np.testing.assert_array_equal(x, y)


# -- replay and the non-finite guard -----------------------------------------------------------------
def test_replay_stores_each_part_in_its_own_dtype():
    space = GoalCells().observation_space
    replay = ReplayBuffer(4, (), obs_space=space)
    obs = observations.empty(space, 3)
    obs["image"][:] = 255
    obs["vector"][:, 1] = 1.0
    replay.add(obs, np.arange(3), np.ones(3), obs, np.zeros(3))
    replay.add(obs, np.arange(3), np.ones(3), obs, np.zeros(3))  # wraps around the capacity of 4
    assert replay.obs["image"].dtype == np.uint8 and len(replay) == 4
    sample = replay.sample(5, np.random.default_rng(0))
    assert sample["obs"]["image"].shape == (5, 16, 16, 1) and (sample["obs"]["image"] == 255).all()
    again = ReplayBuffer(4, (), obs_space=space)
    again.load_state_dict(replay.state_dict())
    np.testing.assert_array_equal(again.state_dict()["obs"]["vector"], replay.state_dict()["obs"]["vector"])


def test_a_non_finite_part_is_named_when_acting_fails():
    class Failing:
        def act(self, obs, explore=True):
            raise ValueError("nan in the sampler")

    obs = {"agent": {"image": np.zeros((2, 2), np.uint8), "vector": np.array([[0.0, np.nan], [0.0, 0.0]])}}
    with pytest.raises(BadObservation, match=r"observations\.agent\.vector\[0, 1\] is nan"):
        act_on(Failing(), obs)


# -- what is refused ---------------------------------------------------------------------------------
def _spec(space, multi_agent=False) -> EnvSpec:
    return EnvSpec("cells", ("agent",), {"agent": space}, {"agent": spaces.Discrete(4)}, multi_agent, 1)


def test_structured_observations_on_a_multi_agent_env_are_refused():
    from support import TabularQConfig, build_tabular_agent, build_tabular_learner

    import rlf
    from rlf.plugins import load_registry

    class Declaring:
        RLF_API_VERSION = 1

        @rlf.hookimpl
        def rlf_register_algorithms(self, register):
            register("declaring", build_agent=build_tabular_agent, build_learner=build_tabular_learner,
                     family="off-policy", config=TabularQConfig, observation_spaces=("Dict", "Tuple"))

    spec = load_registry(extra_plugins=[("declaring", Declaring())], strict=True).algorithm("declaring")
    check_compatible(spec, _spec(GoalCells().observation_space))  # single-agent: fine
    with pytest.raises(IncompatibleError, match="single-agent"):
        check_compatible(spec, _spec(GoalCells().observation_space, multi_agent=True))


PLUGIN_SOURCE = '''
import rlf
from support import TabularQConfig, build_tabular_agent, build_tabular_learner


class DictPlugin:
    RLF_API_VERSION = 1

    @rlf.hookimpl
    def rlf_register_algorithms(self, register):
        register("any-q", build_agent=build_tabular_agent, build_learner=build_tabular_learner,
                 family=rlf.StrategyFamily.OFF_POLICY, config=TabularQConfig)
        register("box-q", build_agent=build_tabular_agent, build_learner=build_tabular_learner,
                 family=rlf.StrategyFamily.OFF_POLICY, config=TabularQConfig, observation_spaces=("Box",))
        register("dict-q", build_agent=build_tabular_agent, build_learner=build_tabular_learner,
                 family=rlf.StrategyFamily.OFF_POLICY, config=TabularQConfig, observation_spaces=("Dict",))


plugin = DictPlugin()
'''


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    site = make_site(tmp_path_factory.mktemp("site"))
    install_fake_plugin(site, "dicts", "rlf_dicts_plugin:plugin", PLUGIN_SOURCE, module="rlf_dicts_plugin")
    return site


@pytest.mark.parametrize("command", ["config", "train"])
@pytest.mark.parametrize("algorithm", ["any-q", "box-q"])
def test_an_algorithm_that_does_not_declare_dict_is_refused_in_one_line(site, tmp_path, command, algorithm):
    run = tmp_path / "run"
    extra = ("--no-progress", "--steps", "16", "--run-dir", str(run)) if command == "train" else ()
    refused = rlf(command, algorithm, "--env", GOAL_CELLS, *extra, site=site)
    assert_one_line_error(refused, f"algorithm {algorithm!r}", "Dict(")
    assert not run.exists()


def test_an_algorithm_declaring_dict_loads(site):
    shown = rlf("config", "dict-q", "--env", GOAL_CELLS, site=site)
    assert shown.returncode == 0, shown.stderr
    assert "GoalCells-v0" in shown.stdout


def test_a_module_that_does_not_import_is_one_line(site):
    refused = rlf("config", "dict-q", "--env", "gym:no_such_module_here:GoalCells-v0", site=site)
    assert_one_line_error(refused, "no_such_module_here", "cannot be imported")


def test_a_replaced_env_worker_hands_its_dict_rows_on_too():
    import os
    import signal

    from rlf.envs import GymVector, Supervision
    from rlf.envs.gym import GymEnvConfig, make_gym_env

    factory = EnvFactory(make_gym_env, GymEnvConfig(id="rlf.envs.goal_cells:GoalCells-v0"))
    vector = GymVector(GOAL_CELLS, factory, 4, subprocess=True, supervision=Supervision(restarts=1))
    try:
        vector.reset(seed=0)
        vector.step({"agent": np.zeros(4, dtype=np.int64)})
        os.kill(vector.groups[0].processes[1].pid, signal.SIGKILL)
        batch = vector.step({"agent": np.zeros(4, dtype=np.int64)})
        assert vector.restarts == 1 and batch.dropped == (1,)
        for _ in range(3):  # the new worker's rows come from its own one-env vector, spliced in
            batch = vector.step({"agent": np.zeros(4, dtype=np.int64)})
            space = vector.spec.observation_spaces["agent"]
            assert observations.fits(space, batch.obs["agent"], 4) is None
            lit = batch.obs["agent"]["image"][1].reshape(-1) == 255
            assert lit.sum() == 16 * 4 and batch.obs["agent"]["vector"][1].sum() == 1.0  # one band, one offset
    finally:
        vector.close()
