// Kernels for the Coalescing experiment: how the pattern of addresses a warp touches sets bandwidth.
#include <stdint.h>

extern "C" {

// One float per thread: the simplest coalesced copy (the occupancy page's memory-bound kernel too), and the
// contiguous reference of the strided and misaligned reads: the same bytes, one 4-byte load and one store per thread,
// no index arithmetic beyond i.
__global__ void copy_f32(const float* __restrict__ src, float* __restrict__ dst, unsigned long long n)
{
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i];
}

// Our best copy: 16-byte loads and stores, grid-stride, four independent loads in flight per thread.
__global__ void copy_f4(const float4* __restrict__ src, float4* __restrict__ dst, unsigned long long n4)
{
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n4; i += 4 * stride) {
        float4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
        dst[i] = a; dst[i + stride] = b; dst[i + 2 * stride] = c; dst[i + 3 * stride] = d;
    }
    for (; i < n4; i += stride) dst[i] = src[i];
}

// Strided gather: thread i reads element (i*stride mod n) + (i*stride div n), a permutation of [0, n) for
// power-of-two n and stride, so every element is read once while neighbours in a warp sit `stride` apart. Both n
// and stride are powers of two, passed as their log2: the index takes a shift, a mask and a shift. (A runtime
// 64-bit `/ n` here compiled to div.u64, dozens of instructions per element, which made stride 1 read 12 % slower
// than copy_f32 on an H200 at block 256 although both move the same bytes with one load and one store.)
__global__ void strided_read(const float* __restrict__ src, float* __restrict__ dst, unsigned long long n,
                             unsigned int log2_stride, unsigned int log2_n)
{
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned long long scaled = i << log2_stride;
    unsigned long long j = (scaled & (n - 1)) + (scaled >> log2_n);
    dst[i] = src[j];
}

// Misaligned read: every warp's 128-byte request straddles two cache lines unless offset % 32 == 0.
__global__ void offset_read(const float* __restrict__ src, float* __restrict__ dst, unsigned long long n,
                            unsigned int offset)
{
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i + offset];
}

struct Particle { float x, y, z, w; };

// Array of structures: reading one field fetches the whole 16-byte struct.
__global__ void aos_sum(const Particle* __restrict__ p, float* __restrict__ out, unsigned long long n)
{
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { Particle q = p[i]; out[i] = q.x + q.y + q.z + q.w; }
}
__global__ void aos_x(const Particle* __restrict__ p, float* __restrict__ out, unsigned long long n)
{
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * p[i].x;
}

// Structure of arrays: each field is its own contiguous array.
__global__ void soa_sum(const float* __restrict__ x, const float* __restrict__ y, const float* __restrict__ z,
                        const float* __restrict__ w, float* __restrict__ out, unsigned long long n)
{
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] + y[i] + z[i] + w[i];
}
__global__ void soa_x(const float* __restrict__ x, float* __restrict__ out, unsigned long long n)
{
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * x[i];
}

#define TILE 32
#define ROWS 8

// Transpose of an n x n matrix. Naive: reads coalesced, writes strided by n.
__global__ void transpose_naive(const float* __restrict__ in, float* __restrict__ out, int n)
{
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS)
        if (x < n && y + j < n) out[(size_t)x * n + y + j] = in[(size_t)(y + j) * n + x];
}

// Through a shared-memory tile: both global reads and writes coalesced; the column reads of the tile
// hit one shared-memory bank 32 times (bank conflicts).
__global__ void transpose_tiled(const float* __restrict__ in, float* __restrict__ out, int n)
{
    __shared__ float tile[TILE][TILE];
    int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS)
        if (x < n && y + j < n) tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * n + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x; y = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS)
        if (x < n && y + j < n) out[(size_t)(y + j) * n + x] = tile[threadIdx.x][threadIdx.y + j];
}

// The same with one padding column: consecutive rows start in different banks, no conflicts.
__global__ void transpose_padded(const float* __restrict__ in, float* __restrict__ out, int n)
{
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS)
        if (x < n && y + j < n) tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * n + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x; y = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS)
        if (x < n && y + j < n) out[(size_t)(y + j) * n + x] = tile[threadIdx.x][threadIdx.y + j];
}

}
