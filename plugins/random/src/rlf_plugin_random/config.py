from pydantic import Field

from rlf import OffPolicyConfig


class RandomConfig(OffPolicyConfig):
    """The random baseline: nothing to tune beyond where its random stream starts."""

    seed_offset: int = Field(0, ge=0, description="Added to the run seed for the action sampler.")
