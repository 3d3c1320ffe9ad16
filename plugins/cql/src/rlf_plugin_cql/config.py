from pydantic import Field

from rlf import OffPolicyConfig


class CQLConfig(OffPolicyConfig):
    """Centralized Q-learning: one table over the joint state and joint action of every agent.

    A table row holds one Q-value per joint action, ``action_dim ** n_agents`` of them (5 actions and
    5 agents: 3125 values, 25 KiB per visited joint state), so the size limits below are checked
    before training starts and while the table grows.
    """

    alpha: float = Field(0.1, gt=0.0, le=1.0, description="Step size of the tabular update.")
    gamma: float = Field(0.99, ge=0.0, le=1.0, description="Discount; only a true terminal cuts the bootstrap.")
    max_joint_actions: int = Field(
        3125, ge=1, le=10_000_000,
        description="Refuse more joint actions (Q-values per table row) than this: 5 actions ** 5 agents = 3125.")
    max_table_mib: int = Field(
        1024, ge=1, le=1_048_576, description="Stop with an error when the joint table would outgrow this (MiB).")
