// Kernels for the peers experiment: GPU-to-GPU latency as nvbandwidth's device_to_device_latency_sm measures it.
// (Peer copies on the SMs use copy_bytes of device_copy.cu; the check pattern is transfers.cu's.)
#include <stdint.h>

extern "C" {

// The chain: node j (every `stride` 8-byte words) holds the address of node j + 1, the last that of node 0, so a
// walk from the buffer's start visits `nodes` nodes, one 128-byte line each, in address order (nvbandwidth's
// next = (i + strideLen) mod n). Written on the GPU that owns the buffer, with its own addresses.
__global__ void chain_fill(unsigned long long* __restrict__ data, unsigned long long nodes, unsigned int stride)
{
    const unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;
    const unsigned long long base = (unsigned long long)data;
    for (unsigned long long j = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; j < nodes; j += step) {
        const unsigned long long next = (j + 1 == nodes) ? 0 : j + 1;
        data[j * stride] = base + next * stride * sizeof(unsigned long long);
    }
}

// One thread follows `steps` pointers from `start` (in a peer's memory, over peer access): each load needs the one
// before, so a step costs one round trip to wherever the chain lives. As nvbandwidth's ptrChasingKernel, the grid has
// a block per SM and only block `walker` walks (the others leave at once): a launch's walk starts from whichever SM
// that block lands on, and the sweep rotates `walker` over the blocks, so its figure covers every SM's place on the
// chip, not one. The end is stored for the host to check (and keeps the loop from being removed).
__global__ void peer_chase(const unsigned long long* start, unsigned int steps, unsigned int walker,
                           unsigned long long* end)
{
    if (blockIdx.x != walker) {
        return;
    }
    const unsigned long long* at = start;
    for (unsigned int i = 0; i < steps; ++i) {
        at = reinterpret_cast<const unsigned long long*>(*at);
    }
    end[0] = reinterpret_cast<unsigned long long>(at);
}

}
