import json
import subprocess
import sys
from importlib.metadata import entry_points

import rlf_plugin_mario.plugin as plugin
from rlf_plugin_mario.config import MarioConfig
from rlf_plugin_mario.env import make_mario

HEAVY = ("gymnasium", "gym", "nes_py", "gym_super_mario_bros", "cv2", "torch")


def test_entry_point_and_api_version():
    (ep,) = [ep for ep in entry_points(group="rlf") if ep.name == "mario"]
    assert ep.value == "rlf_plugin_mario.plugin"
    assert ep.dist.name == "rlf-plugin-mario"
    assert plugin.RLF_API_VERSION == 1


def test_registration_is_light_and_builds_the_env():
    code = (
        "import json, sys, rlf\n"
        "spec = rlf.registry().environment('mario')\n"
        "print(json.dumps({'prefer_subprocess': spec.prefer_subprocess, 'config': spec.config.__name__,\n"
        f"  'loaded': [m for m in {HEAVY!r} if m in sys.modules], 'errors': rlf.registry().errors}}))\n"
    )
    env = {"RLF_LOAD_PLUGINS": "mario", "RLF_STRICT_PLUGINS": "1", "PATH": ""}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found == {"prefer_subprocess": True, "config": "MarioConfig", "loaded": [], "errors": {}}


def test_registered_builder_is_make_mario():
    from rlf_plugin_mario.env import MarioEnv

    import rlf

    spec = rlf.registry().environment("mario")
    assert spec.config is MarioConfig
    assert getattr(spec.build_env, "target", spec.build_env) is make_mario
    env = spec.build_env(MarioConfig(noop_max=0))
    try:
        assert isinstance(env, MarioEnv)
        assert env.observation_space.shape == (4, 84, 84)
    finally:
        env.close()


def test_building_and_stepping_is_silent():
    """No gym "does not support NumPy 2.0" notice, no overflow or deprecation warnings."""
    code = (
        "from rlf_plugin_mario.env import make_mario\n"
        "env = make_mario({'noop_max': 0})\n"
        "env.reset(seed=0)\n"
        "done = False\n"
        "while not done:\n"
        "    _, _, done, _, info = env.step(3)\n"
        "print(info['episode_metrics']['x_pos_max'])\n"
    )
    out = subprocess.run([sys.executable, "-W", "default", "-c", code], capture_output=True, text=True, check=True)
    assert out.stderr == ""
    assert float(out.stdout) > 256
