"""The base of every config model (unknown keys are rejected, values are frozen after load) and the field types
shared by several sections."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, SecretStr

__all__ = ["StrictModel", "Token"]


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


def _not_blank(v: SecretStr) -> SecretStr:
    # Empty means "no token" (`${env:VAR:-}` with the variable unset); spaces alone are a typo or a variable
    # set to a blank line, and a guard that took it for "no token" would leave the route open unnoticed.
    raw = v.get_secret_value()
    if raw and not raw.strip():
        raise ValueError("a token of only whitespace; leave it empty (or unset) for none, or set a real token")
    return v


Token = Annotated[SecretStr, AfterValidator(_not_blank)]
"""A bearer token or password: a secret that is empty (none) or has a non-blank character."""
