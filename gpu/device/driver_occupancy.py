"""The driver's own occupancy answers, recorded on the very cubins PinPoint runs, to check ``gpu.core.occupancy``.

cuOccupancyMaxActiveBlocksPerMultiprocessor (through ``gpu.device.libcuda``: PyCUDA does not wrap it) over block sizes ×
register caps × dynamic shared memory. ``python -m gpu.bench occupancy-driver`` writes the table from a worker.
"""

from __future__ import annotations

from gpu.device import libcuda
from gpu.device.context import GpuRuntime

OCCUPANCY_REGISTER_CAPS = (0, 16, 24, 32, 48, 64, 72, 96, 128, 168, 255)  # 0: no cap
OCCUPANCY_DYNAMIC_SHARED = (0, 1, 1000, 4096, 12288, 30000, 48 * 1024, 70000, 100 * 1024, 150000, 200 * 1024)


def driver_occupancy_table(gpu: GpuRuntime) -> dict:
    """Ask the driver for blocks per SM over block sizes × register counts × shared memory, for each kernel."""
    lib = libcuda.driver()
    limits = gpu.occupancy_limits()
    kernels = [("occupancy", "occ_registers", (f"-maxrregcount={cap}",) if cap else ()) for cap in
               OCCUPANCY_REGISTER_CAPS]
    kernels += [("coalescing", "transpose_padded", ()), ("coalescing", "copy_f32", ()),
                ("reduction", "dot_warp_shuffle", ()), ("occupancy", "occ_chase", ("-DEXTRA_REGS=128",))]
    answers = []
    for stem, name, options in kernels:
        gpu.module(stem, options)
        key = " ".join((stem, *options))
        module = lib.module_load_data(gpu.cubins[key])
        try:
            function = lib.module_get_function(module, name)
            attrs = {attr: lib.func_get_attribute(function, attr) for attr in libcuda.FUNC_ATTRIBUTE}
            max_dynamic = limits.shared_per_block_optin - attrs["SHARED_SIZE_BYTES"]
            lib.func_set_attribute(function, "MAX_DYNAMIC_SHARED_SIZE_BYTES", max_dynamic)
            for dynamic in (*OCCUPANCY_DYNAMIC_SHARED, max_dynamic, max_dynamic + 1):
                for block in range(32, limits.max_threads_per_block + 1, 32):
                    code, blocks = lib.occupancy_max_active_blocks(function, block, dynamic)
                    answers.append({"kernel": f"{name} {' '.join(options)}".strip(), "registers": attrs["NUM_REGS"],
                                    "static_shared": attrs["SHARED_SIZE_BYTES"], "max_dynamic_shared": max_dynamic,
                                    "block_size": block, "dynamic_shared": dynamic, "cu_result": code,
                                    "blocks_per_sm": blocks})
        finally:
            lib.module_unload(module)
    return {"device": limits.as_dict(), "attributes": gpu.attributes, "driver_version": gpu.facts["driver_version"],
            "recorded": gpu.provenance()["timestamp"], "answers": answers}
