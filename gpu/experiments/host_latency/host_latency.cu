// Host-memory latency: one GPU thread follows a chain of indices through a buffer. Each load needs the one
// before it, so a step costs one full access to wherever the buffer lives: pinned host memory mapped into the
// device's address space (zero-copy, across PCIe) or device memory (HBM, or a cache when the chain fits one).
// The same pointer chase as nvbandwidth's host_device_latency_sm, with indices instead of pointers so that one
// chain serves both memories.
extern "C" __global__ void pointer_chase(const unsigned long long* chain, unsigned long long start,
                                         unsigned int steps, unsigned long long* end)
{
    unsigned long long at = start;
    for (unsigned int i = 0; i < steps; ++i) {
        at = chain[at];
    }
    end[0] = at;  // the host checks where the walk ended; the store also keeps the loop from being removed
}
