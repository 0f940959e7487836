// Dot-product kernels, from the per-element atomic of naive code to a bandwidth-bound reduction.
// All accumulate the final sum in double (atomicAdd on double: sm_60+), except the naive one.
#include <stdint.h>

extern "C" {

// One atomicAdd per element into a single float: every thread serialises on one address.
__global__ void dot_atomic_per_element(const float* __restrict__ a, const float* __restrict__ b, float* result,
                                       unsigned long long n)
{
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(result, a[i] * b[i]);
}

// Classic shared-memory tree per block (blockDim.x must be a power of two), one atomic per block.
__global__ void dot_shared_tree(const float* __restrict__ a, const float* __restrict__ b, double* result,
                                unsigned long long n)
{
    extern __shared__ double partial[];
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    partial[threadIdx.x] = i < n ? (double)(a[i] * b[i]) : 0.0;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(result, partial[0]);
}

__device__ __forceinline__ double warp_sum(double v)
{
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;
}

// Block sum through warp shuffles; shared memory only for the 32 warp totals.
__device__ __forceinline__ void block_sum_to(double v, double* result)
{
    __shared__ double warp_totals[32];
    v = warp_sum(v);
    unsigned int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warp_totals[warp] = v;
    __syncthreads();
    if (warp == 0) {
        unsigned int warps = (blockDim.x + 31) >> 5;
        v = lane < warps ? warp_totals[lane] : 0.0;
        v = warp_sum(v);
        if (lane == 0) atomicAdd(result, v);
    }
}

// One element per thread, warp-shuffle block reduction, one atomic per block.
__global__ void dot_warp_shuffle(const float* __restrict__ a, const float* __restrict__ b, double* result,
                                 unsigned long long n)
{
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    block_sum_to(i < n ? (double)(a[i] * b[i]) : 0.0, result);
}

// Grid-stride accumulation: a grid sized to fill the GPU, 16-byte loads, several loads in flight per
// thread, per-thread float partial sums, then one warp-shuffle block reduction and one atomic per block.
__global__ void dot_grid_stride(const float4* __restrict__ a, const float4* __restrict__ b, double* result,
                                unsigned long long n4)
{
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    float s0 = 0.f, s1 = 0.f;
    for (; i + stride < n4; i += 2 * stride) {
        float4 x0 = a[i], y0 = b[i], x1 = a[i + stride], y1 = b[i + stride];
        s0 += x0.x * y0.x + x0.y * y0.y + x0.z * y0.z + x0.w * y0.w;
        s1 += x1.x * y1.x + x1.y * y1.y + x1.z * y1.z + x1.w * y1.w;
    }
    if (i < n4) { float4 x = a[i], y = b[i]; s0 += x.x * y.x + x.y * y.y + x.z * y.z + x.w * y.w; }
    block_sum_to((double)s0 + (double)s1, result);
}

}
