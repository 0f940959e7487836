// Kernels whose throughput depends on occupancy. The worker builds this file several times with
// different -maxrregcount values (register pressure), and launches it with a dynamic shared-memory
// "spoiler" that caps blocks per SM (as gpu-benches does) so occupancy becomes the variable.
#include <stdint.h>

// Register pressure for the latency-bound kernel: EXTRA_REGS values made before the dependent-load chain,
// pinned by an empty asm (so they cannot be recomputed later) and summed after it, so they occupy
// registers across the chain. Cost: about 2 x EXTRA_REGS instructions per thread against 32 dependent
// DRAM loads, which is noise. A one-element copy would pay more for those instructions than for the copy,
// so the memory-bound kernel gets no register pressure: it would measure instructions, not occupancy.
#ifndef EXTRA_REGS
#define EXTRA_REGS 0
#endif
#define PIN_LIVE(v) asm volatile("" : "+f"(v) : : "memory")

extern "C" {

// Memory-bound: one float per thread, like copy_f32, touching the spoiler so it is really allocated.
__global__ void occ_stream(const float* __restrict__ src, float* __restrict__ dst, unsigned long long n)
{
    extern __shared__ float spoiler[];
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i];
    if (i == (unsigned long long)-1) spoiler[0] = 0.f;  // never true: keeps the spoiler without traffic
}

// Latency-bound: a chain of dependent loads (pointer chasing) per thread; only more resident warps hide it.
__global__ void occ_chase(const unsigned int* __restrict__ next, unsigned int* __restrict__ out,
                          unsigned long long n_threads, unsigned int steps)
{
    extern __shared__ float spoiler[];
    unsigned long long t = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_threads) return;
    unsigned int j = (unsigned int)t;
#if EXTRA_REGS > 0
    float keep[EXTRA_REGS];
#pragma unroll
    for (int k = 0; k < EXTRA_REGS; ++k) { keep[k] = (float)(t + k); PIN_LIVE(keep[k]); }
#endif
    for (unsigned int s = 0; s < steps; ++s) j = next[j];
#if EXTRA_REGS > 0
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < EXTRA_REGS; ++k) { PIN_LIVE(keep[k]); sum += keep[k]; }
    if (sum == -1.f) j = 0;  // never true (t + k >= 0): keeps the values without changing the result
#endif
    out[t] = j;
    if (j == 0xffffffffu) spoiler[0] = 0.f;
}

// Register hog for the occupancy calculator's driver check: many live values, so -maxrregcount decides
// how many registers it gets.
__global__ void occ_registers(const float* __restrict__ in, float* __restrict__ out, unsigned long long n)
{
    extern __shared__ float spoiler[];
    unsigned long long t = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    float acc[160];
#pragma unroll
    for (int k = 0; k < 160; ++k) acc[k] = in[(t + k * 131) % n];
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int k = 0; k < 160; ++k) acc[k] = fmaf(acc[k], acc[(k + 7) % 160], acc[(k + 13) % 160]);
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < 160; ++k) s += acc[k];
    if (t < n) out[t] = s;
    if (s == 12345.f) spoiler[0] = s;
}

}
