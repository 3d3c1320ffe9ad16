"""Acting speed of an exported agent: onnxruntime on the ONNX export against rlf's own agent in torch.

A deployment steps one environment at a time, so the unit is one observation in, one greedy action out:

- ``torch``: the agent ``rlf eval`` builds from the file, ``agent.act({id: obs[None]}, explore=False)``
  (torch on ``--threads`` threads, as ``rlf eval`` acts);
- ``onnx``: ``onnxruntime.InferenceSession(model.onnx).run(["action"], {"obs": obs[None]})`` on the file
  ``rlf export AGENT model.onnx`` wrote (``--threads`` intra-op threads).

Both act on the same ``--observations`` observations sampled from the agent's observation space (seeded;
for Mario, random frames: the networks' cost does not depend on what the pixels show), in ``--rounds``
rounds whose order alternates (torch first, then onnx first, ...); the medians of actions per second and
their ratio are printed. The greedy actions of both are compared on every observation.

    python benchmarks/onnx_acting.py                      # the shipped Mario agent (needs rlf-plugin-mario)
    python benchmarks/onnx_acting.py --agent my-run/agent.rlf --observations 2000

Needs rlf's ``onnx`` extra (onnx, onnxruntime).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_AGENT = ROOT / "docs" / "results" / "agents" / "mario-1-1-fast-ppo-seed0.rlf"


def torch_agent(path: Path, threads: int):
    """The agent ``rlf eval`` acts with (built as ``rlf export`` builds it), and its observation spaces."""
    import torch

    import rlf
    from rlf.storage import run_state

    torch.set_num_threads(threads)
    algo = rlf.load(path)
    spec = algo._probe_spec()
    agent = algo.resolved.algorithm.build_agent(algo._context(spec))
    run_state.load_into(agent, algo._agent_state, "agent", check_shapes=True)
    return agent, spec


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", type=Path, default=DEFAULT_AGENT, help="an exported agent (.rlf) or a run directory")
    parser.add_argument("--observations", type=int, default=1000, help="observations acted on per round")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--threads", type=int, default=1, help="torch threads and onnxruntime intra-op threads")
    args = parser.parse_args(argv)
    if min(args.observations, args.rounds, args.threads) < 1:
        print("onnx_acting: error: --observations, --rounds and --threads must be at least 1", file=sys.stderr)
        return 2
    if not args.agent.exists():
        print(f"onnx_acting: error: no agent at {args.agent}", file=sys.stderr)
        return 2
    import numpy as np
    import onnxruntime

    with tempfile.TemporaryDirectory() as scratch:
        model = Path(scratch) / "model.onnx"
        done = subprocess.run([sys.executable, "-c", "import sys; from rlf.cli import main; sys.exit(main())",
                               "export", str(args.agent), str(model)], capture_output=True, text=True)
        if done.returncode != 0:
            print(f"onnx_acting: error: rlf export failed: {done.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
            return 2
        agent, spec = torch_agent(args.agent, args.threads)
        (agent_id,) = spec.agent_ids[:1]
        space = spec.observation_spaces[agent_id]
        space.seed(0)
        observations = [np.asarray(space.sample())[None] for _ in range(args.observations)]
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = args.threads
        options.inter_op_num_threads = 1
        session = onnxruntime.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        inputs = [i.name for i in session.get_inputs()]
        action_output = next(o.name for o in session.get_outputs() if o.name.startswith("action"))

        def act_torch() -> list:
            return [agent.act({agent_id: obs}, explore=False).actions[agent_id][0] for obs in observations]

        def act_onnx() -> list:
            return [session.run([action_output], {inputs[0]: obs})[0][0] for obs in observations]

        same = sum(np.array_equal(a, b) for a, b in zip(act_torch(), act_onnx(), strict=True))  # also warms up
        rates: dict[str, list[float]] = {"torch": [], "onnx": []}
        for round_ in range(args.rounds):
            order = (("torch", act_torch), ("onnx", act_onnx))
            for name, act in order if round_ % 2 == 0 else order[::-1]:
                start = time.perf_counter()
                act()
                rates[name].append(args.observations / (time.perf_counter() - start))
    torch_rate, onnx_rate = statistics.median(rates["torch"]), statistics.median(rates["onnx"])
    print(f"# {args.agent.name}: {space} observations, batch 1, {args.threads} thread(s), "
          f"{args.rounds} alternating rounds of {args.observations}")
    print(f"torch (rlf's agent)   {torch_rate:10.1f} actions/s   rounds: {' '.join(f'{r:.0f}' for r in rates['torch'])}")
    print(f"onnxruntime (export)  {onnx_rate:10.1f} actions/s   rounds: {' '.join(f'{r:.0f}' for r in rates['onnx'])}")
    print(f"onnx/torch ratio: {onnx_rate / torch_rate:.2f}; same greedy action on {same} of {len(observations)} observations")
    return 0


if __name__ == "__main__":
    sys.exit(main())
