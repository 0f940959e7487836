// The compute ceiling: fused multiply-add throughput in FP32 and FP64, with CHAINS independent chains per thread.
//
// Each thread runs CHAINS chains x <- fma(a, x, b), fmas_per_thread FMAs in all (fmas_per_thread / CHAINS per
// chain), then writes the sum of its chains: one store per thread and no load, so memory plays no part. ``a`` and
// ``b`` arrive at run time, so the compiler can neither fold nor shorten a chain. With a = 1 and whole-number b and
// starting values, every intermediate value is a whole number far below 2^24, so the result is exact and counts
// the work: chain c of thread i starts at (i mod 1024) + c and ends at that plus (fmas_per_thread / CHAINS) * b.
//
// The inner loop is unrolled to 256 FMAs per trip whatever CHAINS is, so the loop's own instructions (an add, a
// compare, a branch) cost about 1 % of the issue slots in every variant: only the chains' independence differs.
// With one chain every FMA waits for the one before it (about 4 cycles), and only other warps can fill the pipe;
// more chains give the scheduler independent FMAs within a warp (instruction-level parallelism).

#define FMAS_PER_TRIP 256

template <typename T, int CHAINS>
__device__ __forceinline__ void fma_chains(T* __restrict__ out, T a, T b, unsigned int trips)
{
    const unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    const T start = (T)(unsigned int)(i & 1023u);
    T x[CHAINS];
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) x[c] = start + (T)c;
    for (unsigned int t = 0; t < trips; ++t) {
#pragma unroll
        for (int s = 0; s < FMAS_PER_TRIP / CHAINS; ++s) {
#pragma unroll
            for (int c = 0; c < CHAINS; ++c) x[c] = fma(a, x[c], b);
        }
    }
    T sum = x[0];
#pragma unroll
    for (int c = 1; c < CHAINS; ++c) sum += x[c];
    out[i] = sum;
}

// ``trips`` = fmas_per_thread / 256; the grid covers the output exactly (one element per thread).
#define FMA_KERNELS(CHAINS)                                                                                 \
    extern "C" __global__ void fma_fp32_x##CHAINS(float* __restrict__ out, float a, float b,              \
                                                 unsigned int trips)                                     \
    {                                                                                                     \
        fma_chains<float, CHAINS>(out, a, b, trips);                                                      \
    }                                                                                                     \
    extern "C" __global__ void fma_fp64_x##CHAINS(double* __restrict__ out, double a, double b,           \
                                                 unsigned int trips)                                     \
    {                                                                                                     \
        fma_chains<double, CHAINS>(out, a, b, trips);                                                     \
    }

FMA_KERNELS(1)
FMA_KERNELS(2)
FMA_KERNELS(4)
FMA_KERNELS(8)
FMA_KERNELS(16)
