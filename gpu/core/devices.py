"""Choosing a GPU: by index (``0``) or by board UUID (``GPU-0818954e-…``, or a unique prefix of it), as
CUDA_VISIBLE_DEVICES takes them. Pure: the list of GPUs comes from the device layer (``context.visible_gpus``)."""

from __future__ import annotations

from gpu.core.errors import DeviceNotFound


def board_tail(uuid: str, length: int = 8) -> str:
    """The last characters of a board's UUID, enough to tell boards apart ("4b1d07e2")."""
    return uuid[-length:]


def uuid_tail(uuid: str | None, length: int = 8) -> str:
    """A board's UUID tail in running text ("…4b1d07e2"), or "no UUID"."""
    return f"…{board_tail(uuid, length)}" if isinstance(uuid, str) and uuid else "no UUID"


def describe(gpu: dict) -> str:
    """One GPU in a line: index · model · UUID tail (· host when known)."""
    parts = [str(gpu.get("index", "?")), str(gpu.get("name", "unknown GPU")), uuid_tail(gpu.get("uuid"))]
    if gpu.get("host"):
        parts.append(str(gpu["host"]))
    return " · ".join(parts)


def choose(spec: str | int | None, gpus: list[dict]) -> int:
    """The index of the GPU that ``spec`` names (None or "": the first); DeviceNotFound listing the GPUs otherwise."""
    if not gpus:
        raise DeviceNotFound("no CUDA GPU is visible to this process (check the driver and CUDA_VISIBLE_DEVICES)")
    text = "" if spec is None else str(spec).strip()
    if not text:
        return int(gpus[0]["index"])
    if text.isdigit():
        for gpu in gpus:
            if int(gpu["index"]) == int(text):
                return int(gpu["index"])
    else:
        wanted = text.lower()
        wanted = wanted if wanted.startswith("gpu-") else f"gpu-{wanted}"
        matches = [g for g in gpus if str(g.get("uuid") or "").lower().startswith(wanted)]
        if len(matches) == 1:
            return int(matches[0]["index"])
        if len(matches) > 1:
            raise DeviceNotFound(f"GPU '{text[:64]}' matches {len(matches)} GPUs; give more of its UUID: "
                                 + "; ".join(describe(g) for g in matches))
    raise DeviceNotFound(f"no GPU '{text[:64]}' here; the GPUs are: " + "; ".join(describe(g) for g in gpus))
