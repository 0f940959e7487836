// Kernels for the Transfers experiment. extern "C" keeps the names unmangled for the driver API.
#include <stdint.h>

extern "C" {

// Zero-copy copy: src or dst may be mapped host memory, so every 16-byte load or store crosses PCIe.
// Grid-stride so a bounded grid covers any size; 16-byte accesses keep the link's packets full.
__global__ void copy_vec4(const uint4* __restrict__ src, uint4* __restrict__ dst, unsigned long long n_vec4)
{
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n_vec4; i += stride) {
        dst[i] = src[i];
    }
}

// The check pattern of the Transfers experiment (gpu/experiments/transfers/__init__.py pattern_for computes the same
// words on the host): position-dependent, so a dropped, repeated or shifted word never matches; two seeds
// differ in every word, so a word a copy failed to write never passes for the new pattern.
__device__ __forceinline__ unsigned int pattern_word(unsigned long long i, unsigned int seed)
{
    return ((unsigned int)i * 2654435761u) ^ seed;
}

__global__ void pattern_fill(unsigned int* __restrict__ out, unsigned long long n, unsigned int seed)
{
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = pattern_word(i, seed);
    }
}

// result[0]: how many words differ from the pattern; result[1]: the first of them (start it at ~0).
__global__ void pattern_mismatches(const unsigned int* __restrict__ data, unsigned long long n, unsigned int seed,
                                   unsigned long long* result)
{
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        if (data[i] != pattern_word(i, seed)) {
            atomicAdd(&result[0], 1ull);
            atomicMin(&result[1], i);
        }
    }
}

}
