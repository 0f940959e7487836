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
