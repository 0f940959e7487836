// Kernels for the device_copy experiment: the SM's own copy of n bytes, against the driver's cuMemcpyDtoDAsync.
// The check pattern (fill and mismatch count) is the Transfers experiment's, in transfers.cu.
#include <stdint.h>

// 16-byte loads and stores, grid-stride, four independent loads in flight per thread (as coalescing's copy_f4).
__device__ __forceinline__ void copy_vectors(const uint4* __restrict__ src16, uint4* __restrict__ dst16,
                                             unsigned long long n16, unsigned long long first,
                                             unsigned long long stride)
{
    unsigned long long i = first;
    for (; i + 3 * stride < n16; i += 4 * stride) {
        uint4 a = src16[i], b = src16[i + stride], c = src16[i + 2 * stride], d = src16[i + 3 * stride];
        dst16[i] = a; dst16[i + stride] = b; dst16[i + 2 * stride] = c; dst16[i + 3 * stride] = d;
    }
    for (; i < n16; i += stride) dst16[i] = src16[i];
}

extern "C" {

// A copy of n bytes on the SMs, then the last n % 16 bytes one per thread, so any size copies exactly.
// src and dst must be 16-byte aligned (the experiment passes allocation bases, which are 256-byte aligned).
__global__ void copy_bytes(const unsigned char* __restrict__ src, unsigned char* __restrict__ dst,
                           unsigned long long n)
{
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    const unsigned long long first = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned long long n16 = n / 16;
    copy_vectors(reinterpret_cast<const uint4*>(src), reinterpret_cast<uint4*>(dst), n16, first, stride);
    const unsigned long long tail = n16 * 16 + first;  // fewer than 16 bytes: the first threads take one each
    if (tail < n) dst[tail] = src[tail];
}

// The same copy ``passes`` times in one launch (n a multiple of 16): with source and destination inside the L2, every
// pass after the first is served by the L2, and one launch lasts long enough that its cost is not what is timed
// (back-to-back launches of an L2-sized copy measure the launch rate instead). The empty asm is a compiler memory
// barrier: each pass really loads and stores again.
__global__ void copy_bytes_passes(const unsigned char* __restrict__ src, unsigned char* __restrict__ dst,
                                  unsigned long long n, int passes)
{
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    const unsigned long long first = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll 1
    for (int p = 0; p < passes; ++p) {
        copy_vectors(reinterpret_cast<const uint4*>(src), reinterpret_cast<uint4*>(dst), n / 16, first, stride);
        asm volatile("" ::: "memory");
    }
}

}
