// Kernels of the Memory modes page.

// Reads every 32-bit word of a buffer once (16-byte loads) and adds them into one 64-bit checksum. The
// managed-memory cases time it on a buffer that lives on the host (first touch: pages migrate on fault),
// was prefetched, or is resident; the checksum must equal the host's sum exactly.
extern "C" __global__ void checksum_u32(const uint4* __restrict__ in, unsigned long long n_vec4,
                                        unsigned long long* total)
{
    unsigned long long sum = 0;
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n_vec4;
         i += stride) {
        const uint4 v = in[i];
        sum += (unsigned long long)v.x + v.y + v.z + v.w;
    }
    for (int offset = 16; offset > 0; offset /= 2) {
        sum += __shfl_down_sync(0xffffffffu, sum, offset);
    }
    if ((threadIdx.x & 31) == 0 && sum != 0) {
        atomicAdd(total, sum);
    }
}
