"""A foreign process on a GPU, as the witness must see it: CuPy device-to-device copies in a loop, in its own process
(not PinPoint's), until killed or ``--seconds`` pass. Prints ``ready <pid>`` once its first copy has run.

``python tests/gpu/foreign_copy_loop.py [--device 0] [--bytes 1073741824] [--seconds 600]``
"""

import argparse
import os
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--bytes", type=int, default=1 << 30)
    parser.add_argument("--seconds", type=float, default=600.0)
    args = parser.parse_args()
    import cupy

    with cupy.cuda.Device(args.device):
        source = cupy.ones(args.bytes // 4, dtype=cupy.uint32)
        destination = cupy.empty_like(source)
        destination[...] = source
        cupy.cuda.Device().synchronize()
        print(f"ready {os.getpid()}", flush=True)
        deadline = time.monotonic() + args.seconds
        while time.monotonic() < deadline:
            for _ in range(8):
                destination[...] = source
            cupy.cuda.Device().synchronize()


if __name__ == "__main__":
    main()
