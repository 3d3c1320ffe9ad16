from pydantic import Field

from rlf import OffPolicyConfig


class IQLConfig(OffPolicyConfig):
    """Independent Q-learning: every agent keeps its own table and learns from its own reward.

    The inherited ``exploration`` block defaults to PPAGE's schedule: epsilon 1.0, multiplied by
    0.995 after every finished episode, floored at 0.05.
    """

    alpha: float = Field(0.1, gt=0.0, le=1.0, description="Step size of the tabular update.")
    gamma: float = Field(0.99, ge=0.0, le=1.0, description="Discount; only a true terminal cuts the bootstrap.")
