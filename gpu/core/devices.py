"""Choosing GPUs: one by index (``0``) or by board UUID (``GPU-0818954e-…``, or a unique prefix of it), as
CUDA_VISIBLE_DEVICES takes them, or a device set ("0,1", "all", a list). Pure: the list of GPUs comes from the device
layer (``context.visible_gpus``) or from a worker's hello.

Every refusal is one line that names the bad value and lists the GPUs that exist. The value may come from a URL, a
command line or a file: it is shown without control characters and shortened."""

from __future__ import annotations

import re

from gpu.core.errors import DeviceNotFound
from gpu.core.text import shorten

ALL = "all"
SHOWN_CHARS = 64  # of a value someone typed, in a message
LISTED_GPUS = 16  # GPUs named in a message; a larger machine's others are counted
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
_NUMBERS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def board_tail(uuid: str, length: int = 8) -> str:
    """The last characters of a board's UUID, enough to tell boards apart ("4b1d07e2")."""
    return uuid[-length:]


def uuid_tail(uuid: str | None, length: int = 8) -> str:
    """A board's UUID tail in running text ("…4b1d07e2"), or "no UUID"."""
    return f"…{board_tail(uuid, length)}" if isinstance(uuid, str) and uuid else "no UUID"


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """An outside value for a message: control and invisible formatting characters removed, one line, shortened."""
    return shorten(_CONTROL.sub("", " ".join(str(value).split())), limit)


def describe(gpu: dict) -> str:
    """One GPU in a line: index · model · UUID tail (· host when known)."""
    parts = [str(gpu.get("index", "?")), str(gpu.get("name", "unknown GPU")), uuid_tail(gpu.get("uuid"))]
    if gpu.get("host"):
        parts.append(str(gpu["host"]))
    return " · ".join(shown(p) for p in parts)


def listing(gpus: list[dict]) -> str:
    """The GPUs of a machine for a message, "0 · NVIDIA H100 · …4b1d07e2; 1 · …" (a long list is counted)."""
    named = "; ".join(describe(g) for g in gpus[:LISTED_GPUS])
    return named + (f"; and {len(gpus) - LISTED_GPUS} more" if len(gpus) > LISTED_GPUS else "")


def in_words(number: int) -> str:
    return _NUMBERS[number] if 0 <= number < len(_NUMBERS) else str(number)


def set_label(indices) -> str:
    """A device set in running text: "GPU 1", "GPUs 0,1"."""
    indices = list(indices)
    return f"GPU {indices[0]}" if len(indices) == 1 else f"GPUs {','.join(str(i) for i in indices)}"


def set_spec(indices) -> str:
    """A device set as ``--devices`` takes it: "0,1"."""
    return ",".join(str(i) for i in indices)


def _no_gpus() -> DeviceNotFound:
    return DeviceNotFound("no CUDA GPU is visible to this process (check the driver and CUDA_VISIBLE_DEVICES)")


def _match(entry: object, gpus: list[dict]) -> int:
    """The index of the one GPU that ``entry`` (an index or a UUID or its prefix) names."""
    if isinstance(entry, bool) or not isinstance(entry, (int, str)):
        raise DeviceNotFound(f"GPU '{shown(entry)}' is neither an index nor a board UUID; the GPUs are: "
                             + listing(gpus))
    text = str(entry).strip()
    if text.isascii() and text.isdigit():
        for gpu in gpus:
            if int(gpu["index"]) == int(text):
                return int(gpu["index"])
    elif text:
        wanted = text.lower()
        wanted = wanted if wanted.startswith("gpu-") else f"gpu-{wanted}"
        matches = [g for g in gpus if str(g.get("uuid") or "").lower().startswith(wanted)]
        if len(matches) == 1:
            return int(matches[0]["index"])
        if len(matches) > 1:
            raise DeviceNotFound(f"GPU '{shown(text)}' matches {len(matches)} GPUs; give more of its UUID: "
                                 + listing(matches))
    raise DeviceNotFound(f"no GPU '{shown(text)}' here; the GPUs are: " + listing(gpus))


def choose(spec: str | int | None, gpus: list[dict]) -> int:
    """The index of the GPU that ``spec`` names (None or "": the first); DeviceNotFound listing the GPUs otherwise."""
    if not gpus:
        raise _no_gpus()
    if spec is None or (isinstance(spec, str) and not spec.strip()):
        return int(gpus[0]["index"])
    return _match(spec, gpus)


def set_entries(spec) -> list | None:
    """The entries a device set names, before they are matched: "0,1" → ["0", "1"], [0, "GPU-ab"] as it is; None for
    "all" (every GPU) and [] for nothing named."""
    if isinstance(spec, str):
        if spec.strip().lower() == ALL:
            return None
        return [part.strip() for part in spec.split(",") if part.strip()]
    if isinstance(spec, (list, tuple)):
        return list(spec)
    return [spec]


def choose_set(spec, gpus: list[dict], *, need: int = 1, most: int | None = None, job: str = "this job") -> list[int]:
    """The indices (ascending) of the GPUs that ``spec`` names: "0,1", "all", UUIDs or their prefixes, a list of them,
    one index; None or "" for the job's default (the first GPU, or every GPU when the job needs several).

    ``need``: the fewest GPUs the job measures on (two for a pair); ``most``: the most it can use (one for a
    one-GPU experiment), None for any number. ``job`` names the job in messages ("the peers experiment").
    DeviceNotFound, one line naming the bad value and listing the GPUs, for: a GPU that is not here, the same GPU
    named twice, an empty set, more GPUs than the machine has, too few or too many for the job."""
    if not gpus:
        raise _no_gpus()
    if need > len(gpus):
        raise DeviceNotFound(f"{job} needs {in_words(need)} GPUs; this machine has {len(gpus)}: {listing(gpus)}")
    if spec is None or (isinstance(spec, str) and not spec.strip()):
        spec = ALL if need > 1 else [gpus[0]["index"]]
    entries = set_entries(spec)
    what = shown(",".join(str(e) for e in spec) if isinstance(spec, (list, tuple)) else spec)
    if entries is None:
        chosen = sorted(int(g["index"]) for g in gpus)
    else:
        if not entries:
            raise DeviceNotFound(f"'{what}' names no GPU; give indices (0,1), board UUIDs or '{ALL}'; the GPUs are: "
                                 + listing(gpus))
        if len({str(e).strip().lower() for e in entries}) > len(gpus):
            raise DeviceNotFound(f"'{what}' names {len(entries)} GPUs; this machine has {len(gpus)}: {listing(gpus)}")
        chosen, by = [], {}
        for entry in entries:
            index = _match(entry, gpus)
            if index in by:
                both = "" if str(by[index]).strip() == str(entry).strip() else \
                    f" ('{shown(by[index])}' and '{shown(entry)}')"
                raise DeviceNotFound(f"'{what}' names GPU {index} twice{both}; name each GPU once; the GPUs are: "
                                     + listing(gpus))
            by[index] = entry
            chosen.append(index)
        chosen.sort()
    if len(chosen) < need:
        raise DeviceNotFound(f"'{what}' names {len(chosen)} GPU{'s' if len(chosen) != 1 else ''}; {job} needs "
                             f"{in_words(need)}; the GPUs are: {listing(gpus)}")
    if most is not None and len(chosen) > most:
        raise DeviceNotFound(f"'{what}' names {len(chosen)} GPUs; {job} measures on {in_words(most)}: give "
                             f"{'one index or UUID' if most == 1 else f'at most {most}'}")
    return chosen
