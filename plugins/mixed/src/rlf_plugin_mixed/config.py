from typing import Literal

from pydantic import Field

from rlf import OffPolicyConfig

TeamLearner = Literal["iql", "cql"]


class MixedConfig(OffPolicyConfig):
    """IQL or CQL per team. Defaults follow PPAGE's mixed run: predators CQL, prey IQL.

    A team that does not learn in the env (``env.learners``) has no agents, so its choice is unused.
    The learning rate, discount and epsilon schedule are shared by both teams.
    """

    predators: TeamLearner = Field("cql", description="Learner of the predator team: iql (a table each) or cql (one joint table).")
    prey: TeamLearner = Field("iql", description="Learner of the prey team: iql (a table each) or cql (one joint table).")
    alpha: float = Field(0.1, gt=0.0, le=1.0, description="Step size of the tabular updates.")
    gamma: float = Field(0.99, ge=0.0, le=1.0, description="Discount; only a true terminal cuts the bootstrap.")
    max_joint_actions: int = Field(
        3125, ge=1, le=10_000_000,
        description="CQL teams: refuse more joint actions (Q-values per row) than this (5 ** 5 = 3125).")
    max_table_mib: int = Field(
        1024, ge=1, le=1_048_576, description="CQL teams: stop with an error when a joint table outgrows this (MiB).")
