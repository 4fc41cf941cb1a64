"""Matrix axes that belong to one executor: Ray Tune schedulers and the unified model's
ablation ladder. Torch-free (the runner expands them into cells).

Sources: fugue-compat.md ("Unified model ablation ladder", "Campaign selection syntax"):
the matrix is experiments × executors × compile modes × schedulers (ray only, hpo
experiments only) × sweep rungs (unified_model only) × passes.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Features asked for when a campaign names none (fugue's defaults: vectorised forward and
#: streams on, fused loss off; compile is the campaign's own axis). The default of
#: ``[options.unified_model] features``; the matrix hashes it into unified cells' keys.
DEFAULT_FEATURES = "vf:1,s:1,fl:0"


@dataclass(frozen=True)
class Rung:
    """One rung of the unified model's ablation ladder.

    ``compile``: whether the rung compiles (the mode is the campaign's ``compile_mode``);
    ``features``: the requested extensions, ``vf`` vectorised forward, ``s`` CUDA streams,
    ``fl`` fused loss.
    """

    name: str
    label: str
    compile: bool
    vf: int
    s: int
    fl: int

    @property
    def features(self) -> str:
        """``vf:1,s:0,fl:0``: the harness's ``features`` notation."""
        return f"vf:{self.vf},s:{self.s},fl:{self.fl}"


#: fugue-compat.md, "Unified model ablation ladder", in its order.
ABLATION_LADDER: tuple[Rung, ...] = (
    Rung("A", "baseline (paper-equivalent)", False, 0, 0, 0),
    Rung("B", "+vmap", False, 1, 0, 0),
    Rung("C", "+streams", False, 1, 1, 0),
    Rung("C+FL", "+streams +fused loss", False, 1, 1, 1),
    Rung("D", "+compile", True, 1, 0, 0),
    Rung("D+FL", "+compile +fused loss", True, 1, 0, 1),
)


def rung(name: str) -> Rung:
    for r in ABLATION_LADDER:
        if r.name == name:
            return r
    raise KeyError(name)


def parse_features(text: str) -> dict[str, int]:
    """``"vf:1,s:0,fl:1"`` → ``{"vf": 1, "s": 0, "fl": 1}``; missing flags are absent.

    Raises:
        ValueError: naming the malformed part (unknown flag, value not 0/1).
    """
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition(":")
        if not sep or name not in ("vf", "s", "fl") or value not in ("0", "1"):
            raise ValueError(f"feature {part!r}: expected vf, s or fl with 0 or 1 "
                             "(e.g. 'vf:1,s:0,fl:0')")
        out[name] = int(value)
    return out
