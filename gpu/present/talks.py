"""Talks: a TOML file of scenes, each a claim, the experiment and parameters that test it, the judge of the
measurement (one of ``gpu.present.claims.judges()``: each experiment's view holds its own), the chart to show and a
headline template. No Streamlit, no CUDA.

```toml
title = "My talk"
[[scene]]
claim = "Pinned memory is up to 2× faster"
experiment = "transfers"            # any of gpu.experiments
judge = "pinned_up_to_2x"           # any of gpu.present.claims.judges(); fills the headline's {fields}
chart = "speedup"                   # a chart of the experiment's view (its TALK_FIGURES): speedup, bandwidth …
headline = "{verdict}: {large:.1f}× at {large_size}"
notes = "speaker notes"
[scene.params]                      # the experiment's parameters (as the runner and the pages take them)
sizes = [4096, 1073741824]
```
"""

from __future__ import annotations

import string
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from gpu.core import paths, text
from gpu.core.errors import TalkError
from gpu.core.units import format_bytes
from gpu.experiments import registry
from gpu.experiments.registry import EXPERIMENTS
from gpu.experiments.request import check_params
from gpu.present.claims import judges

TALK_DIR = paths.asset("talks")
BUILT_IN = TALK_DIR / "claims-about-gpu-memory.toml"



@dataclass(frozen=True)
class Scene:
    claim: str
    experiment: str
    judge: str
    chart: str
    headline: str
    params: dict = field(default_factory=dict)
    notes: str = ""


@dataclass(frozen=True)
class Talk:
    title: str
    scenes: list[Scene]


def talk_charts(experiment: str) -> list[str]:
    """The charts a scene of ``experiment`` may show: those its view draws for the talk (``TALK_FIGURES``)."""
    view = registry.view_of(experiment)
    return list(getattr(view, "TALK_FIGURES", {})) if view is not None else []


def load(path: str | Path = BUILT_IN) -> Talk:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise TalkError(f"{path.name}: {exc}") from None
    raw_scenes = data.get("scene")
    if not isinstance(raw_scenes, list) or not raw_scenes:
        raise TalkError(f"{path.name}: a talk needs at least one [[scene]]")
    scenes, known = [], judges()
    for number, raw in enumerate(raw_scenes, start=1):
        where = f"{path.name}, scene {number}"
        missing = [k for k in ("claim", "experiment", "judge", "chart", "headline") if not raw.get(k)]
        if missing:
            raise TalkError(f"{where}: missing {', '.join(missing)}")
        if raw["experiment"] not in EXPERIMENTS:
            raise TalkError(f"{where}: unknown experiment '{raw['experiment']}'")
        if raw["judge"] not in known:
            raise TalkError(f"{where}: unknown judge '{raw['judge']}' (known: {', '.join(known)})")
        charts = talk_charts(raw["experiment"])
        if raw["chart"] not in charts:
            raise TalkError(f"{where}: unknown chart '{raw['chart']}' for {raw['experiment']} "
                            f"(known: {', '.join(charts) or 'none'})")
        try:
            list(string.Formatter().parse(raw["headline"]))
        except ValueError as exc:
            raise TalkError(f"{where}: the headline is not a valid template: {exc}") from None
        params = dict(raw.get("params", {}))
        reasons = check_params(raw["experiment"], params, None)
        if reasons:
            raise TalkError(f"{where}: {'; '.join(reasons)}")
        scenes.append(Scene(claim=raw["claim"], experiment=raw["experiment"], judge=raw["judge"], chart=raw["chart"],
                            headline=raw["headline"], params=params, notes=raw.get("notes", "")))
    return Talk(title=str(data.get("title", path.stem)), scenes=scenes)


def headline(scene: Scene, frame) -> str:
    """The scene's headline filled in from the measurement shown (never from text written in advance)."""
    values = judges()[scene.judge](frame)
    try:
        return text.format_fields(scene.headline, values)
    except (KeyError, ValueError, IndexError) as exc:
        raise TalkError(f"the headline names a value the judge does not give: {exc} "
                        f"(it gives: {', '.join(values)})") from None


def _axis_unit(experiment: str, name: str) -> str:
    """The unit its experiment declares for parameter ``name`` (bytes are written as sizes), or ''."""
    module = EXPERIMENTS.get(experiment)
    return next((a.unit for a in getattr(module, "AXES", ()) if a.name == name), "")


def describe_params(params: dict, experiment: str) -> str:
    """A scene's parameters for the speaker notes: 'sizes 4 KiB, 1 GiB · modes pageable, pinned', byte counts
    written as sizes, never a raw Python dict."""
    parts = []
    for name, value in params.items():
        values = value if isinstance(value, list) else [value]
        sized = _axis_unit(experiment, name) == "bytes"
        shown = [format_bytes(v) if sized and isinstance(v, int) else
                 ("yes" if v is True else "no" if v is False else f"{v:,}" if isinstance(v, int) else str(v))
                 for v in values]
        parts.append(f"{name.replace('_', ' ')} {', '.join(shown)}")
    return " · ".join(parts)
