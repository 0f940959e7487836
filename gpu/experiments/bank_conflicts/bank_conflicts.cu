// Shared-memory bank conflicts: the same shared-memory reads with the words of a warp's threads 1, 2, 4 … 32 words
// apart, in 4- and 8-byte words, unpadded and padded; and a matrix transpose through a shared-memory tile, naive
// ([32][32]) and padded ([32][33]).
//
// Shared memory is 32 banks of 4 bytes: word w (4-byte units) sits in bank w mod 32, and each bank serves one word
// per clock. When the threads of a warp read different words of one bank, the request is replayed once per word
// (an n-way conflict costs n passes); threads reading the same word share it (a broadcast).
//
// The strided reads measure shared memory alone. Each block fills SHARED_WORDS words with word_value(i), then every
// thread reads READS_PER_TRIP words per trip, `trips` times, and writes the sum of what it read (one store per
// thread: global memory plays no part). Lane l of every warp reads words l * row_words + k (k = 0 … 31):
// row_words = stride for the plain layout, stride + 1 for the padded one (each thread's row of `stride` words
// padded to an odd length, so the 32 rows start in 32 different banks). The k-th read of a trip shifts every lane's
// address by the same k words, which moves every lane to the next bank together: each of the 32 reads has the
// conflict of the first. The pointer is volatile, so every read is a shared-memory load of its own (the compiler
// can neither keep a word in a register across trips nor merge neighbouring reads into one wide load), and the
// reads have immediate offsets from one base register: a read costs one load and one add, so the bank passes,
// not the arithmetic, set the time. The sum depends on every word read, so nothing is dead code, and it is exact
// (unsigned arithmetic wraps the same way on the host): it verifies the reads, the layout and the trips.

#include <stdint.h>

#define SHARED_WORDS 2048   // covers lane 31's row (31 * 33) plus 31 shifts: 1,054 words used
#define READS_PER_TRIP 32
#define TILE 32
#define ROWS 8

template <typename T> __device__ __forceinline__ T word_value(unsigned int i);
template <> __device__ __forceinline__ uint32_t word_value<uint32_t>(unsigned int i)
{
    return i * 2654435761u + 1u;
}
template <> __device__ __forceinline__ uint64_t word_value<uint64_t>(unsigned int i)
{
    return (uint64_t)i * 0x9E3779B97F4A7C15ull + 1ull;
}

template <typename T>
__device__ __forceinline__ void strided_reads(T* __restrict__ out, unsigned int row_words, unsigned int trips)
{
    __shared__ T words[SHARED_WORDS];
    for (unsigned int i = threadIdx.x; i < SHARED_WORDS; i += blockDim.x) words[i] = word_value<T>(i);
    __syncthreads();
    const volatile T* mine = words + (threadIdx.x & 31u) * row_words;
    T sum = 0;
    for (unsigned int t = 0; t < trips; ++t) {
#pragma unroll
        for (int k = 0; k < READS_PER_TRIP; ++k) sum += mine[k];
    }
    out[(unsigned long long)blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

// A transpose of an n x n matrix through a TILE x TILE tile, TILE x ROWS threads per tile: rows of the input are
// read into rows of the tile, and columns of the tile written out as rows of the output, so global reads and writes
// are both coalesced. Reading a column of the naive tile (PAD 0), the 32 threads' words are TILE words apart: all
// in one bank (4-byte words) or one pair of banks (8-byte words). One padding word per row (PAD 1) starts each row
// one bank further, and the column falls in 32 different banks.
template <typename T, int PAD>
__device__ __forceinline__ void transpose_tile(const T* __restrict__ in, T* __restrict__ out, int n)
{
    __shared__ T tile[TILE][TILE + PAD];
    int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS)
        if (x < n && y + j < n) tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * n + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS)
        if (x < n && y + j < n) out[(size_t)(y + j) * n + x] = tile[threadIdx.x][threadIdx.y + j];
}

extern "C" {

__global__ void strided_4B(uint32_t* __restrict__ out, unsigned int row_words, unsigned int trips)
{
    strided_reads<uint32_t>(out, row_words, trips);
}
__global__ void strided_8B(uint64_t* __restrict__ out, unsigned int row_words, unsigned int trips)
{
    strided_reads<uint64_t>(out, row_words, trips);
}

__global__ void transpose_naive_4B(const uint32_t* __restrict__ in, uint32_t* __restrict__ out, int n)
{
    transpose_tile<uint32_t, 0>(in, out, n);
}
__global__ void transpose_padded_4B(const uint32_t* __restrict__ in, uint32_t* __restrict__ out, int n)
{
    transpose_tile<uint32_t, 1>(in, out, n);
}
__global__ void transpose_naive_8B(const uint64_t* __restrict__ in, uint64_t* __restrict__ out, int n)
{
    transpose_tile<uint64_t, 0>(in, out, n);
}
__global__ void transpose_padded_8B(const uint64_t* __restrict__ in, uint64_t* __restrict__ out, int n)
{
    transpose_tile<uint64_t, 1>(in, out, n);
}

}
