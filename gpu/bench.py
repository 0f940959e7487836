"""Headless runner: ``python -m gpu.bench transfers [--sizes …] [--modes …] [--out FILE]``.

Runs the experiment through the same worker process the app uses and writes exactly the DataFrame the
page draws (Parquet, or CSV when FILE ends in .csv). Recordings for replay are made with it:
``python -m gpu.bench transfers --profile precise --include-alloc both --out assets/replay/…parquet``.
"""

from __future__ import annotations

import argparse
import sys
import time

from gpu import schema
from gpu.errors import ValidationError, WorkerError
from gpu.experiments import transfers
from gpu.units import SizeError, format_bytes, parse_size_list


def _progress_bar(handle, stream=sys.stderr, width=30) -> None:
    while not handle.wait(0.2):
        if handle.state == "queued":
            stream.write(f"\rqueued behind {handle.queued_ahead} job(s)")
        elif handle.total:
            filled = int(width * handle.done / handle.total)
            stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {handle.done}/{handle.total} "
                         f"{handle.text[:60]:<60}")
        stream.flush()
    stream.write("\n")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python -m gpu.bench", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="experiment", required=True)
    t = sub.add_parser("transfers", help="pageable vs pinned vs write-combined vs mapped copies")
    t.add_argument("--sizes", default="4KiB:1GiB",
                   help="sizes: a list (4KiB,1MiB) and/or ranges of powers of two (4KiB:1GiB)")
    t.add_argument("--modes", default=",".join(transfers.MODES), help="comma-separated: " + ", ".join(transfers.MODES))
    t.add_argument("--directions", default="h2d,d2h", help="comma-separated: h2d, d2h")
    t.add_argument("--include-alloc", choices=["no", "yes", "both"], default="no",
                   help="also time allocating the host buffer (yes), or measure both ways (both)")
    for p in (t,):
        p.add_argument("--profile", default="precise",
                       help="precise (nvbench's defaults) or interactive, optionally with overrides, "
                            "e.g. precise/timeout_s=3")
        p.add_argument("--out", help="write the results here (.parquet or .csv)")
    return parser.parse_args(argv)


def transfer_params(args) -> dict:
    return {
        "sizes": parse_size_list(args.sizes),
        "modes": [m.strip() for m in args.modes.split(",") if m.strip()],
        "directions": [d.strip() for d in args.directions.split(",") if d.strip()],
        "include_alloc": {"no": [False], "yes": [True], "both": [False, True]}[args.include_alloc],
        "profile": args.profile,
    }


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        params = transfer_params(args)
    except SizeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from gpu.backend import start_live

    backend, reason = start_live()
    if backend is None:
        print(f"error: the runner measures live and needs a GPU: {reason}", file=sys.stderr)
        return 3
    print(f"{backend.label()} · profile {args.profile}", file=sys.stderr)
    started = time.perf_counter()
    handle = backend.submit(args.experiment, params)
    _progress_bar(handle)
    try:
        frame = handle.outcome()
    except ValidationError as exc:
        print("error: invalid parameters:\n  - " + "\n  - ".join(exc.reasons), file=sys.stderr)
        return 2
    except WorkerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        backend.client.close()
    print(f"{len(frame)} points in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    show = frame[["variant", "direction", "bytes", "include_alloc", "median_ms", "cv", "samples", "gbps"]].copy()
    show["bytes"] = show["bytes"].map(format_bytes)
    print(show.to_string(index=False))
    if args.out:
        if args.out.endswith(".csv"):
            with open(args.out, "wb") as f:
                f.write(schema.to_csv_bytes(frame))
        else:
            schema.to_parquet(frame, args.out)
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
