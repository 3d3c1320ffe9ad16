"""Every preset the installed plugins ship resolves as `rlf train ALGO --env ENV` layers it: the file is
installed with the wheel, names its algorithm and environment, and every value has the type its config
model asks for (a quoted number is refused, in a preset as anywhere)."""

from __future__ import annotations

import pytest

import rlf
from rlf.resolution import load_preset, resolve

REGISTRY = rlf.registry()
PRESETS = sorted((name, env) for name, spec in REGISTRY.algorithms.items() for env in spec.presets)


def test_the_plugins_ship_their_presets():
    shipped = {name for name, _ in PRESETS}
    assert {"dqn", "ppo", "appo", "icm", "rnd", "knn"} <= shipped, PRESETS


@pytest.mark.parametrize(("algorithm", "env"), PRESETS, ids=[f"{a}-{e}" for a, e in PRESETS])
def test_every_shipped_preset_resolves(algorithm, env):
    label, tables = load_preset(REGISTRY.algorithm(algorithm), env)
    resolved = resolve(algorithm, env, registry=REGISTRY, preset=True)
    assert resolved.preset == label
    settings = resolved.as_dict()
    for section, values in tables.items():
        for key, value in values.items():
            if isinstance(value, dict):
                continue  # a nested table (algo.exploration): its keys validated above
            assert settings[section][key] == value, (section, key)  # nothing the preset sets is lost
