// Kernels of the Streams page: the pipeline's compute stage and the launch hold.

// The pipeline's compute stage: ``repeats`` dependent fused multiply-adds per element (2 FLOP each), so
// the slider moves the work from copy-bound (repeats = 0: a plain device copy) to compute-bound. ``a`` and
// ``b`` arrive at run time, so the compiler cannot fold the chain; with a = -1 and whole-number inputs
// every intermediate value is exact, and the result is x (repeats even) or b - x (odd): checkable exactly.
extern "C" __global__ void fma_chain(const float* __restrict__ in, float* __restrict__ out,
                                     unsigned long long n, float a, float b, int repeats)
{
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float x = in[i];
#pragma unroll 8
        for (int r = 0; r < repeats; ++r) {
            x = fmaf(a, x, b);
        }
        out[i] = x;
    }
}

// nvbench's blocking kernel: holds a stream until the host has queued every launch of a sample, so the
// measured time is the GPU's, not Python's issue rate. ``flags`` is mapped host memory: the host writes
// flags[0] = 1 to release; if that never comes within ``timeout_ns`` the kernel gives up and sets flags[1],
// and the sample is thrown away (a held GPU must never hang).
extern "C" __global__ void hold_stream(volatile int* flags, unsigned long long timeout_ns)
{
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    while (flags[0] == 0) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (now - start > timeout_ns) {
            flags[1] = 1;
            return;
        }
    }
}
