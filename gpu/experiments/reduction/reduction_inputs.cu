// The dot products' input vectors, made on the GPU, and their exact references. Nothing here is timed, and nothing
// here is shared with the measured kernels of reduction.cu: the reference sums are deliberately plain code of their
// own, so a fault in a measured reduction cannot hide behind the same fault in its reference.
//
// Element i of vector v (0 and 1: the -1/0/1 pair; 2 and 3: the uniform pair) under a run's 64-bit seed is made from
// splitmix64's output number k = v * 2^40 + i + 1 for that seed, mix64(seed + k * 0x9e3779b97f4a7c15) (mod 2^64):
// a counter-based hash, so any element can be computed alone, on the host too (gpu/experiments/reduction/inputs.py
// is the same formula in NumPy, and checks a sample of the device's elements bit for bit).
//   -1/0/1: ((h >> 32) * 3 >> 32) - 1, i.e. the top 32 bits scaled to 0, 1 or 2 (each with probability 1/3 within
//           2^-32), minus 1;
//   uniform: ((h >> 40) - 2^23) * 2^-23, the top 24 bits as a signed integer of 24 bits times 2^-23: a value of
//           [-1, 1) on a grid of 2^-23, exact in float32 (a 24-bit integer and a power of two).
#include <stdint.h>

#define REDUCTION_GAMMA 0x9e3779b97f4a7c15ull
#define REDUCTION_VECTOR_SHIFT 40

extern "C" {

__device__ __forceinline__ unsigned long long reduction_mix64(unsigned long long z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

__device__ __forceinline__ float reduction_value(unsigned long long seed, unsigned int vector, unsigned long long i)
{
    unsigned long long counter = ((unsigned long long)vector << REDUCTION_VECTOR_SHIFT) + i + 1ull;
    unsigned long long h = reduction_mix64(seed + counter * REDUCTION_GAMMA);
    if (vector < 2) return (float)((int)(((h >> 32) * 3ull) >> 32) - 1);
    return (float)((int)(h >> 40) - (1 << 23)) * (1.0f / 8388608.0f);  // 2^-23
}

// Vectors 2 * pair and 2 * pair + 1 into a and b (pair 0: -1/0/1, pair 1: uniform), one element of each per thread.
__global__ void reduction_fill_pair(float* __restrict__ a, float* __restrict__ b, unsigned long long n,
                                    unsigned long long seed, unsigned int pair)
{
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        a[i] = reduction_value(seed, 2 * pair, i);
        b[i] = reduction_value(seed, 2 * pair + 1, i);
    }
}

// The reference sums, two passes: each block writes the sum of its own chunk of chunk = blockDim.x * per_thread
// elements (each thread the elements thread, thread + blockDim.x, … of the chunk, in order; then thread 0 adds the
// threads' sums in order), and the host adds the blocks' sums. Every order is fixed: the same data, the same answer.

// -1/0/1 data: products are -1, 0 or 1, summed in 64-bit integers, so the integer dot product is exact.
__global__ void reduction_reference_ternary(const float* __restrict__ a, const float* __restrict__ b,
                                            long long* block_sums, unsigned long long n, unsigned int per_thread)
{
    extern __shared__ long long thread_sums[];
    unsigned long long chunk = (unsigned long long)blockDim.x * per_thread;
    unsigned long long start = (unsigned long long)blockIdx.x * chunk, end = start + chunk < n ? start + chunk : n;
    long long sum = 0;
    for (unsigned long long i = start + threadIdx.x; i < end; i += blockDim.x) sum += (long long)a[i] * (long long)b[i];
    thread_sums[threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.x == 0) {
        long long total = 0;
        for (unsigned int t = 0; t < blockDim.x; ++t) total += thread_sums[t];
        block_sums[blockIdx.x] = total;
    }
}

// Uniform data: each product of two float32 values with 24 significant bits has at most 48, so it is exact in
// float64; the sums are float64. Error bound: a recursive float64 sum of m terms errs by at most (m - 1) * 2^-53 times
// the sum of the terms' magnitudes, so a block's sum errs by at most (per_thread + blockDim.x) * 2^-53 * sum |a_i b_i|
// over its chunk, and the host adds the blocks' sums correctly rounded (math.fsum): in all at most
// (per_thread + blockDim.x) * 2^-53 * sum |a_i b_i| + one rounding. With 64 elements a thread and 256 threads a block
// that is 3.6e-14 * sum |a_i b_i|; for uniform [-1, 1) data, sum |a_i b_i| is about n / 4 and the dot about
// sqrt(n) / 3, so the bound is about 2.7e-14 * sqrt(n) relative (4e-10 at 2^28 in the worst case; rounding errors
// of random sign give about 1e-15). The float32 kernels it judges err by 1e-7 relative or more.
__global__ void reduction_reference_uniform(const float* __restrict__ a, const float* __restrict__ b,
                                            double* block_sums, unsigned long long n, unsigned int per_thread)
{
    extern __shared__ double thread_partials[];
    unsigned long long chunk = (unsigned long long)blockDim.x * per_thread;
    unsigned long long start = (unsigned long long)blockIdx.x * chunk, end = start + chunk < n ? start + chunk : n;
    double sum = 0.0;
    for (unsigned long long i = start + threadIdx.x; i < end; i += blockDim.x) sum += (double)a[i] * (double)b[i];
    thread_partials[threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.x == 0) {
        double total = 0.0;
        for (unsigned int t = 0; t < blockDim.x; ++t) total += thread_partials[t];
        block_sums[blockIdx.x] = total;
    }
}

}
