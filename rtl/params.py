"""Parameter checks shared by every unit's constructor."""

from golden.config import Config

__all__ = ["check_config"]


def check_config(cfg) -> Config:
    """Return ``cfg`` if it is a :class:`golden.config.Config` (validated at its construction)."""
    if not isinstance(cfg, Config):
        raise TypeError(f"cfg must be a golden.config.Config, not {cfg!r}")
    return cfg
